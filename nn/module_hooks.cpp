// Module hooks: the hook table, the forward and forward pre-hooks, and the full backward hook.
//
// Full backward hooks follow PyTorch's BackwardHook (torch/utils/hooks.py): the module's inputs
// and outputs are wrapped in identity nodes, so the engine hands the hook d(loss)/d(output) and
// d(loss)/d(input) exactly where they are complete. A nabla node has one output, so the inputs'
// side is two layers:
//   module input i ──► BackwardHookBackward (one node, an edge to every input requiring grad)
//                        ▲ its output: a scalar token
//   wrapped input i ──► BackwardHookInputBackward_i (identity; its only input is the token)
// Each BackwardHookInputBackward_i keeps the complete gradient of input i and sends zero to the
// token; the engine runs BackwardHookBackward after every one of them (they all feed it), and it
// calls the hooks with all the input gradients and returns the (possibly replaced) ones. Each
// output is wrapped in a BackwardHookOutputBackward that keeps grad_output[j]. When no input
// requires grad, the outputs' wrappers feed a token whose node, BackwardHookOutputsBackward,
// calls the hooks once every output gradient has arrived.
#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

namespace detail {

struct HookTable {
  explicit HookTable(const Module* m) : owner(m) {}
  const Module* owner;  // null once the module is destroyed
  uint64_t next_id = 0;
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<uint64_t, ForwardHook>> forward;
  std::vector<std::pair<uint64_t, FullBackwardHook>> backward;

  bool empty() const { return pre.empty() && forward.empty() && backward.empty(); }
  bool contains(uint64_t id) const {
    auto has = [id](const auto& list) {
      return std::any_of(list.begin(), list.end(), [id](const auto& e) { return e.first == id; });
    };
    return has(pre) || has(forward) || has(backward);
  }
  void remove(uint64_t id) {
    auto drop = [id](auto& list) {
      list.erase(
          std::remove_if(list.begin(), list.end(), [id](const auto& e) { return e.first == id; }),
          list.end());
    };
    drop(pre);
    drop(forward);
    drop(backward);
  }
};

// What one call's backward-hook nodes share.
struct BackwardHookState {
  std::shared_ptr<HookTable> table;
  std::vector<FullBackwardHook> hooks;  // as registered when the forward ran (PyTorch too)
  std::vector<Tensor> inputs;           // the module's inputs (shapes for checks)
  std::vector<Tensor> grad_inputs;      // filled by the input wrappers during backward
  std::vector<Tensor> grad_outputs;     // filled by the output wrappers

  // Calls the hooks; grad_input may be replaced. Clears the gradients kept for this pass.
  void fire(std::vector<Tensor>& grad_input) {
    const std::vector<Tensor> grad_output = grad_outputs;
    std::fill(grad_outputs.begin(), grad_outputs.end(), Tensor());
    std::fill(grad_inputs.begin(), grad_inputs.end(), Tensor());
    const Module* module = table->owner;
    if (!module) return;
    for (const FullBackwardHook& hook : hooks) {
      HookResult r = hook(*module, grad_input, grad_output);
      if (!r) continue;
      if (r->size() != grad_input.size())
        throw AutogradError(
            fmt::format("{} full backward hook: returned {} gradients for {} inputs",
                        module->name(), r->size(), grad_input.size()));
      for (size_t i = 0; i < r->size(); ++i)
        if ((*r)[i].defined() && (*r)[i].shape() != inputs[i].shape())
          throw AutogradError(fmt::format(
              "{} full backward hook: gradient {} has shape {} but the input has shape {}",
              module->name(), i, shape_str((*r)[i].shape()), shape_str(inputs[i].shape())));
      grad_input = std::move(*r);
    }
  }
};

}  // namespace detail

namespace {

using detail::BackwardHookState;

Tensor zero_token() { return zeros({}, kFloat32); }

// The module's inputs gather here (one edge per input that requires grad); runs the hooks.
struct BackwardHookBackward final : Node {
  std::shared_ptr<BackwardHookState> state;
  std::vector<size_t> input_index;  // edge k carries module input input_index[k]
  std::vector<Tensor> backward(const Tensor&) override {
    std::vector<Tensor> grad_input(state->inputs.size());
    for (size_t i : input_index) grad_input[i] = state->grad_inputs[i];
    state->fire(grad_input);
    std::vector<Tensor> out;
    for (size_t i : input_index) out.push_back(grad_input[i]);
    return out;
  }
  const char* name() const override { return "BackwardHookBackward"; }
};

// Identity on module input `index`: keeps its complete gradient, sends zero to the token.
struct BackwardHookInputBackward final : Node {
  std::shared_ptr<BackwardHookState> state;
  size_t index = 0;
  std::vector<Tensor> backward(const Tensor& grad) override {
    state->grad_inputs[index] = grad;
    return {zero_token()};
  }
  const char* name() const override { return "BackwardHookInputBackward"; }
};

// Identity on module output `index` (edge 0); edge 1, when present, feeds the outputs' token.
struct BackwardHookOutputBackward final : Node {
  std::shared_ptr<BackwardHookState> state;
  size_t index = 0;
  std::vector<Tensor> backward(const Tensor& grad) override {
    state->grad_outputs[index] = grad;
    if (next.size() == 2) return {grad, zero_token()};
    return {grad};
  }
  const char* name() const override { return "BackwardHookOutputBackward"; }
};

// No input requires grad: the hooks run here, after every output's gradient has arrived.
struct BackwardHookOutputsBackward final : Node {
  std::shared_ptr<BackwardHookState> state;
  std::vector<Tensor> backward(const Tensor&) override {
    std::vector<Tensor> grad_input(state->inputs.size());
    state->fire(grad_input);
    return {};
  }
  const char* name() const override { return "BackwardHookOutputsBackward"; }
};

// A new handle on t's data whose history is `fn` (the identity node).
Tensor wrapped(const Tensor& t, const std::shared_ptr<Node>& fn) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->dtype = t.dtype();
  impl->shape = t.shape();
  impl->strides = t.strides();
  impl->offset = t.offset();
  impl->is_view = true;
  Tensor out(impl);
  set_history(out, fn);
  return out;
}

bool needs_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// Wraps every input that requires grad; true if any was.
bool wrap_inputs(const std::shared_ptr<BackwardHookState>& state, std::vector<Tensor>& inputs) {
  state->inputs = inputs;
  state->grad_inputs.assign(inputs.size(), Tensor());
  if (std::none_of(inputs.begin(), inputs.end(), needs_grad)) return false;
  auto gather = std::make_shared<BackwardHookBackward>();  // created first: runs last
  gather->state = state;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!needs_grad(inputs[i])) continue;
    gather->input_index.push_back(i);
    gather->next.push_back(Edge{gradient_edge(inputs[i])});
    gather->input_shapes.push_back(inputs[i].shape());
    gather->input_dtypes.push_back(inputs[i].dtype());
  }
  Tensor token = zero_token();
  set_history(token, gather);
  for (size_t i : gather->input_index) {
    auto slot = std::make_shared<BackwardHookInputBackward>();
    slot->state = state;
    slot->index = i;
    connect_inputs(*slot, {&token});
    inputs[i] = wrapped(inputs[i], slot);
  }
  return true;
}

// Wraps every output that requires grad; true if any was.
bool wrap_outputs(const std::shared_ptr<BackwardHookState>& state, std::vector<Tensor>& outputs) {
  state->grad_outputs.assign(outputs.size(), Tensor());
  if (std::none_of(outputs.begin(), outputs.end(), needs_grad)) return false;
  const bool inputs_wrapped = std::any_of(state->inputs.begin(), state->inputs.end(), needs_grad);
  Tensor token;
  if (!inputs_wrapped) {
    auto fire = std::make_shared<BackwardHookOutputsBackward>();
    fire->state = state;
    token = zero_token();
    set_history(token, fire);
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!needs_grad(outputs[j])) continue;
    auto slot = std::make_shared<BackwardHookOutputBackward>();
    slot->state = state;
    slot->index = j;
    if (inputs_wrapped)
      connect_inputs(*slot, {&outputs[j]});
    else
      connect_inputs(*slot, {&outputs[j], &token});
    outputs[j] = wrapped(outputs[j], slot);
  }
  return true;
}

template <class Hook>
std::vector<Hook> snapshot(const std::vector<std::pair<uint64_t, Hook>>& list) {
  std::vector<Hook> out;
  for (const auto& [id, hook] : list) out.push_back(hook);
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// handles and registration

void HookHandle::remove() {
  if (auto table = table_.lock()) table->remove(id_);
  table_.reset();
}

bool HookHandle::active() const {
  auto table = table_.lock();
  return table && table->contains(id_);
}

Module::~Module() {
  if (hooks_) hooks_->owner = nullptr;
}

bool Module::hooks_registered() const { return !hooks_->empty(); }

template <class Hook>
HookHandle Module::add_hook(std::vector<std::pair<uint64_t, Hook>> detail::HookTable::*list,
                            Hook hook) {
  if (!hooks_) hooks_ = std::make_shared<detail::HookTable>(this);
  const uint64_t id = hooks_->next_id++;
  ((*hooks_).*list).emplace_back(id, std::move(hook));
  return HookHandle(hooks_, id);
}

HookHandle Module::add_forward_pre_hook(ForwardPreHook hook) {
  return add_hook(&detail::HookTable::pre, std::move(hook));
}
HookHandle Module::add_forward_hook(ForwardHook hook) {
  return add_hook(&detail::HookTable::forward, std::move(hook));
}
HookHandle Module::add_full_backward_hook(FullBackwardHook hook) {
  return add_hook(&detail::HookTable::backward, std::move(hook));
}

// ----------------------------------------------------------------------------
// a call with hooks

bool Module::before_forward(std::vector<Tensor>& inputs, CallState& state) const {
  const std::shared_ptr<detail::HookTable> table = hooks_;  // a hook may remove hooks
  bool changed = false;
  for (const ForwardPreHook& hook : snapshot(table->pre)) {
    HookResult r = hook(*this, inputs);
    if (!r) continue;
    if (r->size() != inputs.size())
      throw ValueError(fmt::format("{} forward pre-hook: returned {} inputs for a forward of {}",
                                   type_name_, r->size(), inputs.size()));
    inputs = std::move(*r);
    changed = true;
  }
  if (!table->backward.empty() && GradMode::enabled()) {
    state.backward = std::make_shared<detail::BackwardHookState>();
    state.backward->table = table;
    state.backward->hooks = snapshot(table->backward);
    changed = wrap_inputs(state.backward, inputs) || changed;
  }
  return changed;
}

bool Module::after_forward(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                           CallState& state) const {
  const std::shared_ptr<detail::HookTable> table = hooks_;
  bool changed = false;
  for (const ForwardHook& hook : snapshot(table->forward)) {
    HookResult r = hook(*this, inputs, outputs);
    if (!r) continue;
    if (r->size() != outputs.size())
      throw ValueError(fmt::format("{} forward hook: returned {} outputs for a forward of {}",
                                   type_name_, r->size(), outputs.size()));
    outputs = std::move(*r);
    changed = true;
  }
  if (state.backward) changed = wrap_outputs(state.backward, outputs) || changed;
  return changed;
}

}  // namespace nabla::nn
