// nn::Module: the base of every layer. A module owns named parameters and buffers and named child
// modules, all in registration order; names compose with dots exactly as in PyTorch
// ("layers.0.weight"), so state_dict() / load_state_dict() move weights both ways through
// safetensors. Modules are held by std::shared_ptr. Each concrete module declares its own typed
// forward(...), and an operator() that runs it through call(&Self::forward, args...): call()
// runs the module hooks (PyTorch's register_forward_pre_hook, register_forward_hook,
// register_full_backward_hook) and records the module's scope for graph pictures
// (nn/inspect.h). With no hook registered and no scope recording, call() is one branch.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nabla/core/inspect/scope.h"
#include "nabla/core/io/safetensors.h"
#include "nabla/core/tensor.h"

namespace nabla::nn {

// An ordered list of (dotted name, tensor): the format of state_dict() and of safetensors files.
using StateDict = io::NamedTensors;

class Module;

// --- module hooks -------------------------------------------------------------------------------
// Inputs are the forward's Tensor arguments in order (undefined ones included; other arguments,
// such as option structs, are not shown); outputs are the result's tensors (module_outputs).
// A hook returns nothing to keep its arguments, or replacements for all of them (a Tensor is
// accepted for a single one), as in PyTorch:
//   pre-hook(module, inputs)                           -> new inputs for forward
//   forward hook(module, inputs, outputs)              -> new outputs
//   full backward hook(module, grad_input, grad_output) -> new grad_input
// grad_input holds d(loss)/d(input) per input (undefined for inputs that need no gradient),
// grad_output d(loss)/d(output) per output; the hook runs once the gradients of every input are
// complete, or, when no input requires grad, once those of the outputs are.
using HookResult = std::optional<std::vector<Tensor>>;
using ForwardPreHook = std::function<HookResult(const Module&, const std::vector<Tensor>&)>;
using ForwardHook = std::function<HookResult(const Module&, const std::vector<Tensor>&,
                                             const std::vector<Tensor>&)>;
using FullBackwardHook = std::function<HookResult(const Module&, const std::vector<Tensor>&,
                                                  const std::vector<Tensor>&)>;

namespace detail {
struct HookTable;
struct BackwardHookState;
struct ScopeTable;
extern constinit thread_local ScopeTable* scope_table;  // set by nn::RecordScopes
inline bool recording_scopes() { return scope_table != nullptr; }
// The scope record for `m` under the current scope (null when m is not in the recorded model).
std::shared_ptr<const inspect::ModuleScope> scope_for_call(const Module& m);

// A hook's return value as a HookResult: void, a Tensor (undefined: keep), or a vector.
template <class G>
HookResult hook_result(G&& run) {
  using R = std::invoke_result_t<G&>;
  if constexpr (std::is_void_v<R>) {
    run();
    return std::nullopt;
  } else if constexpr (std::is_same_v<std::decay_t<R>, Tensor>) {
    Tensor t = run();
    if (!t.defined()) return std::nullopt;
    return std::vector<Tensor>{t};
  } else {
    return HookResult(run());
  }
}

// call()'s view of one forward argument: Tensors are held by value (a hook may replace them),
// everything else by reference.
template <class A>
struct ArgRef {
  A* ptr;
};
template <class A>
auto hold_arg(A& a) {
  if constexpr (std::is_same_v<std::remove_cv_t<A>, Tensor>)
    return Tensor(a);
  else
    return ArgRef<A>{&a};
}
inline Tensor& unwrap_arg(Tensor& t) { return t; }
template <class A>
A& unwrap_arg(ArgRef<A>& r) {
  return *r.ptr;
}
inline void collect_arg(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
template <class A>
void collect_arg(const ArgRef<A>&, std::vector<Tensor>&) {}
inline void assign_arg(Tensor& t, const std::vector<Tensor>& from, size_t& k) { t = from[k++]; }
template <class A>
void assign_arg(ArgRef<A>&, const std::vector<Tensor>&, size_t&) {}
}  // namespace detail

// The tensors of a forward's result, for hooks. Modules returning a struct define an overload
// next to it (found by argument-dependent lookup), e.g. MhaOutput -> {&output, &weights}.
inline std::vector<Tensor*> module_outputs(Tensor& t) { return {&t}; }

// Returned by register_*_hook. remove() takes the hook out (idempotent, safe after the module is
// gone); the handle itself does not remove on destruction (PyTorch's RemovableHandle), ScopedHook
// does.
class HookHandle {
 public:
  HookHandle() = default;
  void remove();
  bool active() const;  // registered and not removed

 private:
  friend class Module;
  HookHandle(std::weak_ptr<detail::HookTable> table, uint64_t id)
      : table_(std::move(table)), id_(id) {}
  std::weak_ptr<detail::HookTable> table_;
  uint64_t id_ = 0;
};

class ScopedHook {
 public:
  explicit ScopedHook(HookHandle handle) : handle_(std::move(handle)) {}
  ~ScopedHook() { handle_.remove(); }
  ScopedHook(const ScopedHook&) = delete;
  ScopedHook& operator=(const ScopedHook&) = delete;

 private:
  HookHandle handle_;
};

// Pushes a module's scope for its lifetime when scopes are recorded (Module::enter_scope).
class ScopeEntry {
 public:
  explicit ScopeEntry(std::shared_ptr<const inspect::ModuleScope> scope) {
    if (scope) push_.emplace(std::move(scope));
  }
  ScopeEntry(const ScopeEntry&) = delete;
  ScopeEntry& operator=(const ScopeEntry&) = delete;

 private:
  std::optional<inspect::ModuleScopePush> push_;
};

class Module {
 public:
  explicit Module(std::string type_name);
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The type name used in messages and summary(), e.g. "Linear".
  const std::string& name() const { return type_name_; }

  // --- registration (names: non-empty, no '.', unique within this module) ----
  // Registers a leaf tensor as a parameter (sets requires_grad) and returns it (same handle).
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Registers a buffer (state that is not trained, e.g. running statistics). Non-persistent
  // buffers are left out of state_dict().
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  // Takes a buffer of this module out (nn/prune.h's remove); false when there is none.
  bool remove_buffer(const std::string& name);
  // Registers a child module and returns it, typed.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // --- traversal (registration order; own entries first, then children depth-first; a tensor
  // or module reachable twice, e.g. a shared submodule, is listed once) -----------------------
  StateDict named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  StateDict named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // Every module below this one with its dotted path (this module itself is not included).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;

  // --- modes and gradients ----------------------------------------------------
  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // sets every parameter's grad to undefined

  // --- state -----------------------------------------------------------------
  // Parameters and persistent buffers with dotted PyTorch names, in PyTorch's order. The tensors
  // are detached handles sharing storage with the module (clone() them to snapshot).
  StateDict state_dict() const;
  // Copies values in place (under NoGradGuard), so parameter handles held elsewhere (an
  // optimizer) stay valid. Floating dtypes convert like copy_: a BF16/F16 checkpoint into a
  // float32 model widens exactly, a float32 one into a bfloat16 model rounds to nearest even; a
  // floating tensor for an int64/bool one (or back) is an error. Everything is validated first:
  // a failed load changes nothing. strict: missing and unexpected keys are errors. Shape and
  // dtype mismatches are always errors. One ValueError lists every problem.
  void load_state_dict(const StateDict& dict, bool strict = true);
  // Converts every floating parameter and buffer to dt in place (handles stay valid; grads are
  // dropped). Call it before training, not while a graph is alive.
  void to(DType dt);

  // --- inspection -------------------------------------------------------------
  int64_t num_parameters() const;  // total element count
  std::string summary() const;     // table: name, shape, count; then the total
  // Calls fn on every child module (recursively, children first) and then on this one.
  void apply(const std::function<void(Module&)>& fn);

  // --- hooks (see the top of this file; they run in registration order) --------
  template <class F>
  HookHandle register_forward_pre_hook(F hook) {
    return add_forward_pre_hook(
        [h = std::move(hook)](const Module& m, const std::vector<Tensor>& in) mutable {
          return detail::hook_result([&] { return h(m, in); });
        });
  }
  template <class F>
  HookHandle register_forward_hook(F hook) {
    return add_forward_hook([h = std::move(hook)](const Module& m, const std::vector<Tensor>& in,
                                                  const std::vector<Tensor>& out) mutable {
      return detail::hook_result([&] { return h(m, in, out); });
    });
  }
  template <class F>
  HookHandle register_full_backward_hook(F hook) {
    return add_full_backward_hook(
        [h = std::move(hook)](const Module& m, const std::vector<Tensor>& grad_in,
                              const std::vector<Tensor>& grad_out) mutable {
          return detail::hook_result([&] { return h(m, grad_in, grad_out); });
        });
  }

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

  // Runs forward with hooks and scope: `Tensor operator()(const Tensor& x) const { return
  // call(&Linear::forward, x); }`.
  template <class R, class D, class... P, class... A>
  R call(R (D::*forward)(P...) const, A&&... args) const {
    const D& self = static_cast<const D&>(*this);
    return run_call<R>([&self, forward](auto&... a) -> R { return (self.*forward)(a...); },
                       args...);
  }
  template <class R, class D, class... P, class... A>
  R call(R (D::*forward)(P...), A&&... args) {
    D& self = static_cast<D&>(*this);
    return run_call<R>([&self, forward](auto&... a) -> R { return (self.*forward)(a...); },
                       args...);
  }
  // This module's scope alone, for entry points besides operator() (Linear::forward_activation):
  // the nodes they record are grouped with the module, but no hook runs.
  ScopeEntry enter_scope() const {
    return ScopeEntry(detail::recording_scopes() ? detail::scope_for_call(*this) : nullptr);
  }

 private:
  struct Buffer {
    std::string name;
    Tensor value;
    bool persistent;
  };
  void check_new_name(const char* what, const std::string& name) const;
  void collect_parameters(const std::string& prefix, bool recurse, StateDict& out,
                          std::set<const TensorImpl*>& seen) const;
  void collect_buffers(const std::string& prefix, bool recurse, StateDict& out,
                       std::set<const TensorImpl*>& seen) const;
  void collect_state(const std::string& prefix, StateDict& out) const;

  // --- hooks (nn/module_hooks.cpp) ---
  struct CallState {
    std::shared_ptr<detail::BackwardHookState> backward;  // set when backward hooks wrap
  };
  template <class Hook>
  HookHandle add_hook(std::vector<std::pair<uint64_t, Hook>> detail::HookTable::*list, Hook hook);
  HookHandle add_forward_pre_hook(ForwardPreHook hook);
  HookHandle add_forward_hook(ForwardHook hook);
  HookHandle add_full_backward_hook(FullBackwardHook hook);
  bool has_hooks() const { return hooks_ && hooks_registered(); }
  bool hooks_registered() const;
  // Pre-hooks, then the backward hooks' input wrapping. True if `inputs` changed.
  bool before_forward(std::vector<Tensor>& inputs, CallState& state) const;
  // Forward hooks, then the backward hooks' output wrapping. True if `outputs` changed.
  bool after_forward(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                     CallState& state) const;

  template <class R, class F, class... A>
  R run_call(F&& forward, A&... args) const {
    if (!detail::recording_scopes() && !has_hooks()) return forward(args...);
    ScopeEntry scope = enter_scope();
    if (!has_hooks()) return forward(args...);
    auto held = std::make_tuple(detail::hold_arg(args)...);
    std::vector<Tensor> inputs;
    std::apply([&](auto&... h) { (detail::collect_arg(h, inputs), ...); }, held);
    CallState state;
    if (before_forward(inputs, state)) {
      size_t k = 0;
      std::apply([&](auto&... h) { (detail::assign_arg(h, inputs, k), ...); }, held);
    }
    R out = std::apply([&](auto&... h) -> R { return forward(detail::unwrap_arg(h)...); }, held);
    static_assert(std::is_same_v<decltype(module_outputs(out)), std::vector<Tensor*>>,
                  "declare std::vector<Tensor*> module_outputs(YourOutput&) for hooks");
    std::vector<Tensor*> slots = module_outputs(out);
    std::vector<Tensor> outputs;
    for (Tensor* t : slots) outputs.push_back(*t);
    if (after_forward(inputs, outputs, state))
      for (size_t i = 0; i < slots.size(); ++i) *slots[i] = outputs[i];
    return out;
  }

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::shared_ptr<detail::HookTable> hooks_;  // null until a hook is registered
};

}  // namespace nabla::nn
