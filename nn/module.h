// nn::Module: the base of every layer. A module owns named parameters and buffers and named child
// modules, all in registration order; names compose with dots exactly as in PyTorch
// ("layers.0.weight"), so state_dict() / load_state_dict() move weights both ways through
// safetensors. Modules are held by std::shared_ptr. Each concrete module declares its own typed
// forward(...) and operator(); the base class knows nothing about forward.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/io/safetensors.h"
#include "core/tensor.h"

namespace nabla::nn {

// An ordered list of (dotted name, tensor): the format of state_dict() and of safetensors files.
using StateDict = io::NamedTensors;

class Module {
 public:
  explicit Module(std::string type_name);
  virtual ~Module() = default;
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
  // optimizer) stay valid; converts dtype like copy_. Everything is validated first: a failed
  // load changes nothing. strict: missing and unexpected keys are errors. Shape mismatches are
  // always errors. One ValueError lists every problem.
  void load_state_dict(const StateDict& dict, bool strict = true);
  // Converts every floating parameter and buffer to dt in place (handles stay valid; grads are
  // dropped). Call it before training, not while a graph is alive.
  void to(DType dt);

  // --- inspection -------------------------------------------------------------
  int64_t num_parameters() const;  // total element count
  std::string summary() const;     // table: name, shape, count; then the total
  // Calls fn on every child module (recursively, children first) and then on this one.
  void apply(const std::function<void(Module&)>& fn);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

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

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace nabla::nn
