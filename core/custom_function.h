// Custom differentiable ops from outside the library, in the style of libtorch's
// torch::autograd::Function<T> (pytorch.org/cppdocs, "Custom autograd functions"):
//
//   struct Softplus : autograd::Function<Softplus> {
//     static Tensor forward(autograd::FunctionCtx* ctx, const Tensor& x, double beta) {
//       ctx->save_for_backward({x});
//       ctx->saved_data["beta"] = beta;
//       return ...;                                   // computed in no-grad mode
//     }
//     static std::vector<Tensor> backward(autograd::FunctionCtx* ctx,
//                                         const std::vector<Tensor>& grads) {
//       Tensor x = ctx->get_saved_variables()[0];
//       return {grads[0] * ..., Tensor()};            // one per forward argument after ctx
//     }
//   };
//   Tensor y = Softplus::apply(x, 2.0);
//
// apply() records one node whose edges are the forward's arguments (a null edge for a
// non-tensor one), so backward returns one gradient per argument, undefined for those that
// need none. Saved tensors carry core's in-place check: a saved tensor modified after the
// forward is an AutogradError at backward. Written with ops, backward is recorded under
// create_graph, so gradients of gradients work. nabla's nodes have one output: forward may
// return several tensors (a std::vector<Tensor>), but at most one differentiable; mark the
// others with mark_non_differentiable (integer outputs never are). docs/custom-ops.md.
#pragma once
#include <any>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/tensor.h"

namespace nabla::autograd {

class FunctionCtx;
namespace detail {
class CustomNode;
void finish_forward(const std::shared_ptr<CustomNode>& node, FunctionCtx& ctx,
                    std::vector<Tensor>& outputs, const std::vector<const TensorImpl*>& inputs);
}  // namespace detail

class FunctionCtx {
 public:
  FunctionCtx() = default;
  FunctionCtx(const FunctionCtx&) = delete;
  FunctionCtx& operator=(const FunctionCtx&) = delete;
  ~FunctionCtx();

  // Tensors for the backward (inputs, outputs or others), in forward; a second call replaces.
  void save_for_backward(std::vector<Tensor> tensors);
  // The saved tensors, in order. An AutogradError if one was modified in place since the forward
  // or the graph was already freed by a backward without retain_graph.
  std::vector<Tensor> get_saved_variables() const;
  // Non-tensor values for the backward, by name (libtorch's ctx->saved_data).
  std::map<std::string, std::any> saved_data;
  // saved_data[key] as V; an AutogradError naming the key if it is missing or of another type.
  template <class V>
  V saved(const std::string& key) const {
    auto it = saved_data.find(key);
    if (it == saved_data.end()) missing_saved(key);
    if (const V* v = std::any_cast<V>(&it->second)) return *v;
    wrong_saved_type(key, typeid(V).name());
  }
  // Outputs of forward (the returned tensors themselves) that get no gradient.
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  // Whether forward argument i (after ctx) needs a gradient.
  bool needs_input_grad(size_t i) const;

 private:
  friend class detail::CustomNode;
  friend void detail::finish_forward(const std::shared_ptr<detail::CustomNode>&, FunctionCtx&,
                                     std::vector<Tensor>&, const std::vector<const TensorImpl*>&);
  template <class T>
  friend struct Function;
  [[noreturn]] void missing_saved(const std::string& key) const;
  [[noreturn]] void wrong_saved_type(const std::string& key, const char* type) const;

  detail::CustomNode* node_ = nullptr;  // null when nothing is recorded
  std::vector<Tensor> to_save_;         // held until apply() knows the outputs
  std::vector<std::unique_ptr<SavedTensor>> saved_;
  std::vector<const TensorImpl*> non_differentiable_;
};

namespace detail {

using BackwardFn = std::vector<Tensor> (*)(FunctionCtx*, const std::vector<Tensor>&);

// The node apply() records: its backward calls T::backward with one gradient per output.
class CustomNode final : public Node {
 public:
  CustomNode(std::string name, BackwardFn fn) : name_(std::move(name)), backward_fn_(fn) {}
  std::vector<Tensor> backward(const Tensor& grad) override;
  const char* name() const override { return name_.c_str(); }
  FunctionCtx ctx;
  size_t num_outputs = 0, output_index = 0;  // which output carries the gradient

 private:
  std::string name_;
  BackwardFn backward_fn_;
};

// "SoftplusBackward" for a struct named (any namespace) Softplus.
std::string custom_node_name(const std::type_info& type);
// Wires the outputs after forward ran: aliases of inputs detached, one differentiable output
// given the node's history, the saved tensors saved with their versions.
void finish_forward(const std::shared_ptr<CustomNode>& node, FunctionCtx& ctx,
                    std::vector<Tensor>& outputs, const std::vector<const TensorImpl*>& inputs);

inline const Tensor* tensor_arg(const Tensor& t) { return &t; }
template <class A>
const Tensor* tensor_arg(const A&) {
  return nullptr;
}
inline const TensorImpl* impl_of(const Tensor* t) {
  return t && t->defined() ? t->impl_ptr().get() : nullptr;
}

}  // namespace detail

// Derive T from Function<T> and give it static forward(FunctionCtx*, args...) returning a Tensor
// or std::vector<Tensor>, and static backward(FunctionCtx*, const std::vector<Tensor>& grads).
template <class T>
struct Function {
  template <class... Args>
  static auto apply(const Args&... args) {
    using Out = decltype(T::forward(static_cast<FunctionCtx*>(nullptr), args...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, std::vector<Tensor>>,
                  "forward must return Tensor or std::vector<Tensor>");
    auto node = make_node<detail::CustomNode>({detail::tensor_arg(args)...},
                                              detail::custom_node_name(typeid(T)), &call_backward);
    FunctionCtx unrecorded;
    FunctionCtx* ctx = node ? &node->ctx : &unrecorded;
    ctx->node_ = node.get();
    const std::vector<const TensorImpl*> inputs{detail::impl_of(detail::tensor_arg(args))...};
    std::vector<Tensor> outputs;
    {
      NoGradGuard no_grad;  // forward's own ops are not recorded
      if constexpr (std::is_same_v<Out, Tensor>) {
        outputs.push_back(T::forward(ctx, args...));
      } else {
        outputs = T::forward(ctx, args...);
      }
    }
    detail::finish_forward(node, *ctx, outputs, inputs);
    if constexpr (std::is_same_v<Out, Tensor>) {
      return outputs[0];
    } else {
      return outputs;
    }
  }

 private:
  static std::vector<Tensor> call_backward(FunctionCtx* ctx, const std::vector<Tensor>& grads) {
    return T::backward(ctx, grads);
  }
};

}  // namespace nabla::autograd
