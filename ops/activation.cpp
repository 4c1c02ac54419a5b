// GELU and SiLU. gelu is fused: one kernel forward, one kernel for its derivative. The derivative
// kernel is itself a recorded op (gelu_backward) whose backward uses primitive ops, so gradients
// of any order work. gelu_composite is its twin built from primitive ops. The reference kernels
// below are plain loops over gelu_math's formulas; the tuned ones are in ops/kernels/gelu.*.
#include "nabla/ops/activation.h"

#include <cmath>
#include <numbers>
#include <type_traits>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/gelu_math.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/kernels/gelu.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduced_float.h"
#include "nabla/ops/unary.h"

namespace nabla {
using namespace gelu_math;  // NOLINT(google-build-using-namespace): the per-element formulas
namespace {

// d^2 gelu / dx^2 from primitive ops (used only for second and higher derivatives):
//   exact:  phi(x) (2 - x^2)
//   tanh:   (1 - t^2) (u' - x t u'^2 + 3 sqrt(2/pi) kappa x^2),  u = sqrt(2/pi) (x + kappa x^3)
Tensor gelu_second_derivative(const Tensor& x, GeluApproximate a) {
  Tensor x2 = square(x);
  if (a == GeluApproximate::None) return exp(x2 * -0.5) * kInvSqrt2Pi * (2.0 - x2);
  Tensor t = tanh((x + x2 * x * kKappa) * kSqrt2OverPi);
  Tensor du = (x2 * (3 * kKappa) + 1.0) * kSqrt2OverPi;
  return (1.0 - square(t)) * (du - x * t * square(du) + x2 * (3 * kSqrt2OverPi * kKappa));
}

}  // namespace

// ----------------------------------------------------------------------------
// gelu
//   forward:   exact  y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
//              tanh   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   backward:  grad_x = grad * gelu'(x)      (fused kernel gelu_backward, itself differentiable)
//              exact  gelu'(x) = Phi(x) + x phi(x)
//              tanh   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//              saves x
namespace {

// Reference kernels: one element at a time, with the formulas of ops/gelu_math.h.
Tensor gelu_reference(const Tensor& x_in, GeluApproximate a) {
  Tensor x = x_in.detach().contiguous(), y = empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = gelu_value(xp[i], a);
  });
  return y;
}

// grad * gelu'(x), grad and x broadcast to one shape.
Tensor gelu_backward_reference(const Tensor& grad_in, const Tensor& x_in, GeluApproximate a) {
  kernels::check_same_dtype("gelu_backward", grad_in, x_in);
  const Shape shape = broadcast_shapes("gelu_backward", grad_in.shape(), x_in.shape());
  Tensor g = grad_in.detach().expand(shape).contiguous();
  Tensor x = x_in.detach().expand(shape).contiguous(), y = empty(shape, x.dtype());
  dispatch_float(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] = gp[i] * gelu_derivative(xp[i], a);
  });
  return y;
}

}  // namespace

struct GeluBackward final : Node {
  SavedTensor x{this, "x"};
  GeluApproximate approximate;
  explicit GeluBackward(GeluApproximate a) : approximate(a) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {gelu_backward(grad, x.get(), approximate)};
  }
  const char* name() const override { return "GeluBackward"; }
};

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  if (reduced::any(x))
    return reduced::in_float32(
        "gelu", [approximate](const Tensor& x32) { return gelu(x32, approximate); }, x);
  inspect::OpScope op_scope("gelu", {&x});
  Tensor y = kernels::tuned_enabled() ? kernels::gelu_forward(x, approximate)
                                      : gelu_reference(x, approximate);
  if (auto node = make_node<GeluBackward>({&x}, approximate)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// gelu_backward (the derivative kernel, recorded so that double backward works)
//   forward:   y = grad * gelu'(x)
//   backward:  grad_grad = gg * gelu'(x)  (= gelu_backward(gg, x)),  grad_x = gg * grad * gelu''(x)
//              saves grad and x
struct GeluBackwardBackward final : Node {
  SavedTensor grad_in{this, "grad_in"}, x{this, "x"};
  GeluApproximate approximate;
  explicit GeluBackwardBackward(GeluApproximate a) : approximate(a) {}
  std::vector<Tensor> backward(const Tensor& gg) override {
    Tensor xv = x.get();
    return {needs_input_grad(0) ? gelu_backward(gg, xv, approximate) : Tensor(),
            needs_input_grad(1) ? gg * grad_in.get() * gelu_second_derivative(xv, approximate)
                                : Tensor()};
  }
  const char* name() const override { return "GeluBackwardBackward"; }
};

Tensor gelu_backward(const Tensor& grad, const Tensor& x, GeluApproximate a) {
  inspect::OpScope op_scope("gelu_backward", {&grad, &x});
  Tensor y = kernels::tuned_enabled() ? kernels::gelu_grad(grad, x, a)
                                      : gelu_backward_reference(grad, x, a);
  if (auto node = make_node<GeluBackwardBackward>({&grad, &x}, a)) {
    if (node->needs_input_grad(1)) node->grad_in.save(grad);
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// gelu_composite: the same formulas from primitive ops (their backward comes from theirs)
Tensor gelu_composite(const Tensor& x, GeluApproximate approximate) {
  inspect::OpScope op_scope("gelu_composite", {&x});
  dispatch_float(x.dtype(), "gelu_composite", [](auto) {});  // errors name this op, not erf's
  if (approximate == GeluApproximate::None) return x * 0.5 * (1.0 + erf(x * kSqrt1_2));
  return x * 0.5 * (1.0 + tanh((x + x * x * x * kKappa) * kSqrt2OverPi));
}

// ----------------------------------------------------------------------------
// silu
//   forward:   y = x sigmoid(x)   (NOTE: written as x e^x / (1 + e^x) for x < 0: no overflow)
//   backward:  grad_x = grad * s (1 + x (1 - s)),  s = sigmoid(x)      saves x
struct SiluBackward final : Node {
  SavedTensor x{this, "x"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get();
    Tensor s = sigmoid(xv);
    return {grad * s * (1.0 + xv * (1.0 - s))};
  }
  const char* name() const override { return "SiluBackward"; }
};

Tensor silu(const Tensor& x) {
  if (reduced::any(x))
    return reduced::in_float32(
        "silu", [](const Tensor& x32) { return silu(x32); }, x);
  inspect::OpScope op_scope("silu", {&x});
  Tensor y = kernels::map_float("silu", x, [](auto v) {
    using T = decltype(v);
    if (v >= 0) return v / (T(1) + std::exp(-v));
    const T e = std::exp(v);
    return v * e / (T(1) + e);
  });
  if (auto node = make_node<SiluBackward>({&x})) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

}  // namespace nabla
