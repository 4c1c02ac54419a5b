#include "nabla/ops/reduce.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/broadcast.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/reduced_float.h"
#include "nabla/ops/row_layout.h"

namespace nabla {

Shape reduced_keepdim_shape(const char* op, const Shape& shape, const std::vector<int64_t>& dims) {
  const std::vector<bool> reduced = kernels::reduced_dims(op, shape, dims);
  Shape out = shape;
  for (size_t i = 0; i < out.size(); ++i)
    if (reduced[i]) out[i] = 1;
  return out;
}

Shape squeeze_reduced(const Shape& keepdim_shape, const Shape& input_shape,
                      const std::vector<int64_t>& dims) {
  const std::vector<bool> reduced = kernels::reduced_dims("squeeze_reduced", input_shape, dims);
  Shape out;
  for (size_t i = 0; i < keepdim_shape.size(); ++i)
    if (!reduced[i]) out.push_back(keepdim_shape[i]);
  return out;
}

// ----------------------------------------------------------------------------
// sum
//   forward:   y = sum of x over dims (all dims if none given)
//   backward:  grad_x = grad (with the reduced dims restored as size 1) expanded to x.shape
struct SumBackward final : Node {
  Shape input_shape, keepdim_shape;
  SumBackward(Shape in, Shape kd) : input_shape(std::move(in)), keepdim_shape(std::move(kd)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {grad.reshape(keepdim_shape).expand(input_shape)};
  }
  const char* name() const override { return "SumBackward"; }
};

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (reduced::any(x))
    return reduced::in_float32(
        "sum", [&](const Tensor& x32) { return sum(x32, dims, keepdim); }, x);
  inspect::OpScope op_scope("sum", {&x});
  // As PyTorch: bools are counted, into int64 (not differentiable, so no node is lost).
  if (x.dtype() == kBool) return sum(x.to(kInt64), dims, keepdim);
  Shape kd = reduced_keepdim_shape("sum", x.shape(), dims);
  Tensor y = sum_to_kernel(x, kd);
  // same elements in the same order: drop the size-1 dims
  if (!keepdim) reshape_fresh_(y, squeeze_reduced(kd, x.shape(), dims));
  if (auto node = make_node<SumBackward>({&x}, x.shape(), kd)) set_history(y, node);
  return y;
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

// ----------------------------------------------------------------------------
// mean: sum / count (composite; its backward comes from sum's and div's)
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (reduced::any(x))
    return reduced::in_float32(
        "mean", [&](const Tensor& x32) { return mean(x32, dims, keepdim); }, x);
  inspect::OpScope op_scope("mean", {&x});
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("mean: expects a floating tensor, got {} {} (as PyTorch; convert first, e.g. "
                    "mean(x.to(kFloat32)))",
                    dtype_name(x.dtype()), shape_str(x.shape())));
  Shape kd = reduced_keepdim_shape("mean", x.shape(), dims);
  const int64_t count = x.numel() / std::max<int64_t>(shape_numel(kd), 1);
  // NOTE: a mean over zero elements is NaN, as in PyTorch.
  return div(sum(x, dims, keepdim), static_cast<double>(count));
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

}  // namespace nabla
