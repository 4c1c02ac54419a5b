#include "nabla/core/custom_function.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "nabla/core/error.h"

namespace nabla::autograd {

FunctionCtx::~FunctionCtx() = default;

void FunctionCtx::save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }

std::vector<Tensor> FunctionCtx::get_saved_variables() const {
  if (!node_) return to_save_;  // nothing recorded: the tensors as given
  std::vector<Tensor> out;
  out.reserve(saved_.size());
  for (const auto& s : saved_) out.push_back(s->get());
  return out;
}

void FunctionCtx::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.push_back(t.impl_ptr().get());
}

bool FunctionCtx::needs_input_grad(size_t i) const { return node_ && node_->needs_input_grad(i); }

void FunctionCtx::missing_saved(const std::string& key) const {
  throw AutogradError(fmt::format("{}: saved_data has no entry '{}'",
                                  node_ ? node_->name() : "custom Function", key));
}

void FunctionCtx::wrong_saved_type(const std::string& key, const char* type) const {
  throw AutogradError(fmt::format("{}: saved_data['{}'] holds a {}, not the requested {}",
                                  node_ ? node_->name() : "custom Function", key,
                                  saved_data.at(key).type().name(), type));
}

namespace detail {

std::string custom_node_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  if (auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  return name + "Backward";
}

std::vector<Tensor> CustomNode::backward(const Tensor& grad) {
  std::vector<Tensor> grads(num_outputs);
  grads[output_index] = grad;
  std::vector<Tensor> result = backward_fn_(&ctx, grads);
  if (result.size() != next.size())
    throw AutogradError(fmt::format(
        "{}: backward returned {} gradients, expected {} (one per forward argument after ctx; "
        "an undefined Tensor for a non-tensor argument)",
        name(), result.size(), next.size()));
  for (size_t i = 0; i < result.size(); ++i)
    if (!needs_input_grad(i)) result[i] = Tensor();  // nobody receives it
  return result;
}

void finish_forward(const std::shared_ptr<CustomNode>& node, FunctionCtx& ctx,
                    std::vector<Tensor>& outputs, const std::vector<const TensorImpl*>& inputs) {
  const std::string name = node ? node->name() : "custom Function";
  std::vector<const TensorImpl*> returned;  // what forward returned, before any detach
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.defined())
      throw AutogradError(
          fmt::format("{}: forward returned an undefined tensor as output {}", name, i));
    returned.push_back(out.impl_ptr().get());
    // An input returned as is (or anything with history) becomes a fresh handle: giving it this
    // node's history must not rewrite the input's.
    const bool is_input = std::find(inputs.begin(), inputs.end(), returned.back()) != inputs.end();
    if (is_input || out.requires_grad()) out = out.detach();
  }
  if (!node) return;
  auto is_marked = [&](size_t i) {
    return std::find(ctx.non_differentiable_.begin(), ctx.non_differentiable_.end(), returned[i]) !=
           ctx.non_differentiable_.end();
  };
  std::vector<size_t> differentiable;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (is_floating(outputs[i].dtype()) && !is_marked(i)) differentiable.push_back(i);
  if (differentiable.size() > 1) {
    std::string shapes;
    for (size_t i : differentiable) shapes += fmt::format(" {}", shape_str(outputs[i].shape()));
    throw AutogradError(fmt::format(
        "{}: forward returned {} differentiable outputs (shapes{}); a custom Function records "
        "one node with one output, so mark the others with ctx->mark_non_differentiable",
        name, differentiable.size(), shapes));
  }
  node->num_outputs = outputs.size();
  for (const Tensor& t : ctx.to_save_) {
    auto saved = std::make_unique<SavedTensor>(node.get());
    const auto it =
        std::find(returned.begin(), returned.end(), t.defined() ? t.impl_ptr().get() : nullptr);
    if (it == returned.end() || !t.defined()) {
      saved->save(t);
    } else {  // an output: saved without a reference cycle through the node
      const auto k = static_cast<size_t>(it - returned.begin());
      saved->save(outputs[k], /*is_output=*/!differentiable.empty() && k == differentiable[0]);
    }
    ctx.saved_.push_back(std::move(saved));
  }
  ctx.to_save_.clear();
  if (differentiable.empty()) {  // nothing to differentiate: the node is dropped
    ctx.node_ = nullptr;
    return;
  }
  node->output_index = differentiable[0];
  set_history(outputs[node->output_index], node);
}

}  // namespace detail
}  // namespace nabla::autograd
