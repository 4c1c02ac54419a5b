// linear. x's leading dims are flattened into M rows (a view when x's layout allows it) and the
// product is one GEMM; weight^T is a transposed view, which matmul hands to BLAS as a transpose
// flag, so neither the forward nor the backward copies weight.
#include "ops/linear.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"
#include "ops/gemm.h"
#include "ops/linalg.h"
#include "ops/reduce.h"

namespace nabla {

// ----------------------------------------------------------------------------
// linear
//   forward:   y2d = x2d @ W^T + b       x2d (M, in), W (out, in), b (out) -> y2d (M, out)
//   backward:  grad_x2d = grad2d @ W,  grad_W = grad2d^T @ x2d,  grad_b = sum of grad2d's rows
//              saves W if x needs grad, x if W needs grad
struct LinearBackward final : Node {
  SavedTensor x{this}, weight{this};
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Shape& x_shape = input_shapes[0];
    const int64_t in = input_shapes[1][1], out = input_shapes[1][0];
    const int64_t M = shape_numel(Shape(x_shape.begin(), x_shape.end() - 1));
    Tensor grad2d = grad.reshape({M, out});
    Tensor grad_x, grad_w, grad_b;
    if (needs_input_grad(0)) grad_x = matmul(grad2d, weight.get()).reshape(x_shape);
    if (needs_input_grad(1)) grad_w = matmul(grad2d.t(), x.get().reshape({M, in}));
    if (needs_input_grad(2)) grad_b = sum(grad2d, {0});
    return {grad_x, grad_w, grad_b};
  }
  const char* name() const override { return "LinearBackward"; }
};

namespace {

// y (M, out) = x2d W^T + b as one GEMM: y starts as copies of b and the GEMM adds into it
// (beta = 1), so y is written twice instead of zeroed, written and then read again for the bias.
Tensor linear_forward(const Tensor& x2d_in, const Tensor& weight_in, const Tensor& bias) {
  const int64_t M = x2d_in.size(0), in = x2d_in.size(1), out = weight_in.size(0);
  Tensor y = empty({M, out}, x2d_in.dtype());
  if (y.numel() == 0) return y;
  // BLAS reads rows with unit stride; anything else is copied once.
  auto gemm_ready = [](const Tensor& t) {
    return (t.stride(1) == 1 || t.size(1) <= 1) && t.stride(0) >= std::max<int64_t>(t.size(1), 1)
               ? t
               : t.contiguous();
  };
  Tensor x2d = gemm_ready(x2d_in), w = gemm_ready(weight_in);
  dispatch_float(y.dtype(), "linear", [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    T beta = T(0);
    if (bias.defined()) {
      Tensor b = bias.detach().contiguous();
      const T* bp = b.data_ptr<T>();
      parallel_for(M, out, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) std::copy(bp, bp + out, yp + r * out);
      });
      beta = T(1);
    }
    if (in == 0) {
      if (!bias.defined()) std::fill(yp, yp + M * out, T(0));
      return;
    }
    blas::gemm<T>(false, true, M, out, in, T(1), x2d.data_ptr<T>(), x2d.stride(0), w.data_ptr<T>(),
                  w.stride(0), beta, yp, out);
  });
  return y;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw DTypeError(fmt::format("linear: dtype mismatch, x {} weight {} bias {}",
                                 dtype_name(x.dtype()), dtype_name(weight.dtype()),
                                 bias.defined() ? dtype_name(bias.dtype()) : "none"));
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("linear: expects float32 or float64, got {}", dtype_name(x.dtype())));
  const bool bad_bias = bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0));
  if (x.dim() == 0 || weight.dim() != 2 || x.size(-1) != weight.size(1) || bad_bias)
    throw ShapeError(fmt::format(
        "linear: expected x (..., in), weight (out, in), bias (out,); got x {}, weight {}, bias {}",
        shape_str(x.shape()), shape_str(weight.shape()),
        bias.defined() ? shape_str(bias.shape()) : "none"));
  const int64_t in = weight.size(1), out = weight.size(0);
  Shape y_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t M = shape_numel(y_shape);
  y_shape.push_back(out);
  Tensor y = linear_forward(x.detach().reshape({M, in}), weight.detach(), bias);  // (M, out)
  y.impl().shape = y_shape;  // same elements in the same order: (M, out) -> (..., out)
  y.impl().strides = contiguous_strides(y_shape);
  if (auto node = make_node<LinearBackward>({&x, &weight, &bias})) {
    if (node->needs_input_grad(1)) node->x.save(x);
    if (node->needs_input_grad(0)) node->weight.save(weight);
    set_history(y, node);
  }
  return y;
}

}  // namespace nabla
