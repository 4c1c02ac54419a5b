// linear and linear_activation. x's leading dims are flattened into M rows (a view when x's layout
// allows it) and the product is one GEMM; weight^T is a transposed view, which matmul hands to
// BLAS as a transpose flag, so neither the forward nor the backward copies weight. The reference
// kernels here are plain loops; the tuned ones (bias in the GEMM, per-thread blocks) are in
// ops/kernels/linear.*.
#include "nabla/ops/linear.h"

#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/activation.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/autocast.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/gelu_math.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/linear.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/reduced_float.h"
#include "nabla/ops/unary.h"

namespace nabla {

// ----------------------------------------------------------------------------
// linear
//   forward:   y2d = x2d @ W^T + b       x2d (M, in), W (out, in), b (out) -> y2d (M, out)
//   backward:  grad_x2d = grad2d @ W,  grad_W = grad2d^T @ x2d,  grad_b = sum of grad2d's rows
//              saves W if x needs grad, x if W needs grad
struct LinearBackward final : Node {
  SavedTensor x{this, "x"}, weight{this, "weight"};
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

// Reference kernel: y[r][o] = sum_k x[r][k] w[o][k] + b[o], each sum in double.
Tensor linear_reference(const Tensor& x2d_in, const Tensor& weight, const Tensor& bias) {
  const int64_t M = x2d_in.size(0), in = x2d_in.size(1), out = weight.size(0);
  Tensor x2d = x2d_in.contiguous(), w = weight.contiguous(), y = empty({M, out}, x2d.dtype());
  Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  dispatch_float(y.dtype(), "linear", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x2d.data_ptr<T>();
    const T* wp = w.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for (int64_t r = 0; r < M; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0;
        for (int64_t k = 0; k < in; ++k)
          acc += static_cast<double>(xp[r * in + k]) * static_cast<double>(wp[o * in + k]);
        if (b.defined()) acc += static_cast<double>(b.data_ptr<T>()[o]);
        yp[r * out + o] = static_cast<T>(acc);
      }
    }
  });
  return y;
}

// y (M, out) = x2d W^T + b by the tuned or the reference kernel.
Tensor linear_forward(const Tensor& x2d, const Tensor& weight, const Tensor& bias) {
  return kernels::tuned_enabled() ? kernels::linear_forward(x2d, weight, bias)
                                  : linear_reference(x2d, weight, bias);
}

// Dtype and shape checks of linear and linear_activation; `who` names the op.
void check_linear(const char* who, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw DTypeError(fmt::format("{}: dtype mismatch, x {} weight {} bias {}", who,
                                 dtype_name(x.dtype()), dtype_name(weight.dtype()),
                                 bias.defined() ? dtype_name(bias.dtype()) : "none"));
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("{}: expects float32 or float64, got {}", who, dtype_name(x.dtype())));
  const bool bad_bias = bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0));
  if (x.dim() == 0 || weight.dim() != 2 || x.size(-1) != weight.size(1) || bad_bias)
    throw ShapeError(fmt::format(
        "{}: expected x (..., in), weight (out, in), bias (out,); got x {}, weight {}, bias {}",
        who, shape_str(x.shape()), shape_str(weight.shape()),
        bias.defined() ? shape_str(bias.shape()) : "none"));
}

// 2 M in out: the product's multiply-adds (the bias and the activation are not counted, as in
// torch.utils.flop_counter).
int64_t linear_flops(const Tensor& x, const Tensor& weight) {
  return 2 * (x.numel() / std::max<int64_t>(x.size(-1), 1)) * weight.size(0) * weight.size(1);
}

// (..., in) -> (..., out): the output shape of x's leading dims and `out` features.
Shape output_shape(const Tensor& x, int64_t out) {
  Shape y_shape(x.shape().begin(), x.shape().end() - 1);
  y_shape.push_back(out);
  return y_shape;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast::applies({&x, &weight, &bias})) return autocast::linear(x, weight, bias);
  // bfloat16 upcasts for now; a bfloat16 GEMM (oneDNN) would replace this line.
  if (reduced::any(x, weight, bias))
    return reduced::in_float32(
        "linear",
        [](const Tensor& x32, const Tensor& w32, const Tensor& b32) {
          return linear(x32, w32, b32);
        },
        x, weight, bias);
  inspect::OpScope op_scope("linear", {&x, &weight, &bias});
  check_linear("linear", x, weight, bias);
  op_scope.count_flops([&] { return linear_flops(x, weight); });
  const int64_t in = weight.size(1), out = weight.size(0);
  const Shape y_shape = output_shape(x, out);
  const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor y = linear_forward(x.detach().reshape({M, in}), weight.detach(), bias);  // (M, out)
  reshape_fresh_(y, y_shape);  // same elements in the same order: (M, out) -> (..., out)
  if (auto node = make_node<LinearBackward>({&x, &weight, &bias})) {
    if (node->needs_input_grad(1)) node->x.save(x);
    if (node->needs_input_grad(0)) node->weight.save(weight);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// linear_activation
//   forward:   z = x2d @ W^T + b, y = act(z)   (ReLU in place: z is not kept)
//   backward:  grad_z = grad * act'(z) and grad_b = sum of grad_z's rows in one pass over the
//              rows, then grad_x = grad_z @ W, grad_W = grad_z^T @ x2d (as linear's)
//              saves W and x as linear does, plus z (GELU) or y (ReLU: y <= 0 iff z <= 0)
namespace {

// Reference kernels, one element at a time. act(z), and d act / dz from z (GELU) or from
// y = relu(z) (ReLU).
template <class T>
T activation_value(T z, LinearActivation act) {
  if (act == LinearActivation::ReLU) return z <= 0 ? T(0) : z;
  return gelu_math::gelu_value(
      z, act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh);
}
// g * d act / dz; ReLU gives 0 where y <= 0, also for an inf or NaN g, and passes g elsewhere
// (where y is NaN too: PyTorch's threshold_backward, and relu's own backward).
template <class T>
T activation_grad(T g, T saved, LinearActivation act) {
  if (act == LinearActivation::ReLU) return saved <= 0 ? T(0) : g;
  return g * gelu_math::gelu_derivative(saved, act == LinearActivation::GELU
                                                   ? GeluApproximate::None
                                                   : GeluApproximate::Tanh);
}

// y = act(z) over contiguous (M, out) tensors (y may be z).
void activation_forward_reference(const Tensor& z, const Tensor& y, LinearActivation act) {
  dispatch_float(z.dtype(), "linear_activation", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for (int64_t i = 0; i < z.numel(); ++i) yp[i] = activation_value(zp[i], act);
  });
}

// grad_z = g * act'(saved) over contiguous (M, out) tensors; grad_b (if defined) = the column
// sums of grad_z, each in row order in double.
void activation_backward_reference(const Tensor& g, const Tensor& saved, const Tensor& grad_z,
                                   const Tensor& grad_b, LinearActivation act) {
  const int64_t rows = g.size(0), cols = g.size(1);
  dispatch_float(g.dtype(), "linear_activation", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data_ptr<T>();
    const T* sp = saved.data_ptr<T>();
    T* zp = grad_z.data_ptr<T>();
    for (int64_t i = 0; i < rows * cols; ++i) zp[i] = activation_grad(gp[i], sp[i], act);
    if (!grad_b.defined()) return;
    for (int64_t c = 0; c < cols; ++c) {
      double acc = 0;
      for (int64_t r = 0; r < rows; ++r) acc += static_cast<double>(zp[r * cols + c]);
      grad_b.data_ptr<T>()[c] = static_cast<T>(acc);
    }
  });
}

Tensor apply(LinearActivation act, const Tensor& z) {
  if (act == LinearActivation::ReLU) return relu(z);
  return gelu(z, act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh);
}

}  // namespace

struct LinearActivationBackward final : Node {
  SavedTensor x{this, "x"}, weight{this, "weight"}, bias{this, "bias"},
      saved{this, "saved"};  // saved: z (GELU) or y (ReLU)
  LinearActivation act;
  explicit LinearActivationBackward(LinearActivation a) : act(a) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Shape& x_shape = input_shapes[0];
    const int64_t in = input_shapes[1][1], out = input_shapes[1][0];
    const int64_t M = shape_numel(Shape(x_shape.begin(), x_shape.end() - 1));
    Tensor s = saved.get().reshape({M, out}), grad_z, grad_b;
    if (GradMode::enabled()) {  // create_graph: the same formulas with recorded ops
      // GELU's derivative depends on z, so z is recomputed with history for higher orders.
      Tensor g2d = grad.reshape({M, out});
      if (act == LinearActivation::ReLU) {
        grad_z = where(le(s, 0.0), 0.0, g2d);
      } else {
        Tensor z = linear(x.get(), weight.get(), bias.defined() ? bias.get() : Tensor());
        grad_z = gelu_backward(
            g2d, z.reshape({M, out}),
            act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh);
      }
      if (needs_input_grad(2)) grad_b = sum(grad_z, {0});
    } else {
      Tensor g2d = grad.contiguous().reshape({M, out});
      grad_z = empty({M, out}, g2d.dtype());
      if (needs_input_grad(2)) grad_b = empty({out}, g2d.dtype());
      if (kernels::tuned_enabled()) {
        kernels::linear_activation_backward(g2d, s, grad_z, grad_b, act);
      } else {
        activation_backward_reference(g2d, s, grad_z, grad_b, act);
      }
    }
    Tensor grad_x, grad_w;
    if (needs_input_grad(0)) grad_x = matmul(grad_z, weight.get()).reshape(x_shape);
    if (needs_input_grad(1)) grad_w = matmul(grad_z.t(), x.get().reshape({M, in}));
    return {grad_x, grad_w, grad_b};
  }
  const char* name() const override { return "LinearActivationBackward"; }
};

Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         LinearActivation act) {
  if (autocast::applies({&x, &weight, &bias}))
    return autocast::linear_activation(x, weight, bias, act);
  inspect::OpScope op_scope("linear_activation", {&x, &weight, &bias});
  check_linear("linear_activation", x, weight, bias);
  op_scope.count_flops([&] { return linear_flops(x, weight); });
  const int64_t in = weight.size(1), out = weight.size(0);
  const Shape y_shape = output_shape(x, out);
  const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor z = linear_forward(x.detach().reshape({M, in}), weight.detach(), bias);  // (M, out)
  const bool in_place = act == LinearActivation::ReLU;
  Tensor y = in_place ? z : empty({M, out}, z.dtype());
  if (kernels::tuned_enabled()) {
    kernels::linear_activation_forward(z, y, act);
  } else {
    activation_forward_reference(z, y, act);
  }
  reshape_fresh_(y, y_shape);  // same elements in the same order: (M, out) -> (..., out)
  if (auto node = make_node<LinearActivationBackward>({&x, &weight, &bias}, act)) {
    // GELU keeps x, W and b whatever needs grad: create_graph recomputes z from them.
    if (node->needs_input_grad(1) || !in_place) node->x.save(x);
    if (node->needs_input_grad(0) || !in_place) node->weight.save(weight);
    if (!in_place && bias.defined()) node->bias.save(bias);
    if (in_place) {
      node->saved.save(y, /*is_output=*/true);
    } else {
      node->saved.save(z);
    }
    set_history(y, node);
  }
  return y;
}

Tensor linear_activation_composite(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   LinearActivation act) {
  inspect::OpScope op_scope("linear_activation_composite", {&x, &weight, &bias});
  check_linear("linear_activation_composite", x, weight, bias);  // errors name this op
  return apply(act, linear(x, weight, bias));
}

}  // namespace nabla
