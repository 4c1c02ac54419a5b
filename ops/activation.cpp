// GELU and SiLU. gelu is fused: one kernel forward, one kernel for its derivative. The derivative
// kernel is itself a recorded op (gelu_backward) whose backward uses primitive ops, so gradients
// of any order work. gelu_composite is the reference built from primitive ops.
#include "ops/activation.h"

#include <cmath>
#include <numbers>
#include <type_traits>

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/gelu_math.h"
#include "ops/kernel_helpers.h"
#include "ops/pointwise.h"
#include "ops/unary.h"
#include "ops/vec_math.h"

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
// gelu_backward (the derivative kernel, recorded so that double backward works)
//   forward:   y = grad * gelu'(x)
//   backward:  grad_grad = gg * gelu'(x)  (= gelu_backward(gg, x)),  grad_x = gg * grad * gelu''(x)
//              saves grad and x
struct GeluBackwardBackward final : Node {
  SavedTensor grad_in{this}, x{this};
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
  Tensor y = a == GeluApproximate::None
                 ? kernels::map_binary_float(
                       "gelu_backward", grad, x,
                       [](auto g, auto v) { return g * gelu_derivative<GeluApproximate::None>(v); })
                 : kernels::map_binary_float("gelu_backward", grad, x, [](auto g, auto v) {
                     return g * gelu_derivative<GeluApproximate::Tanh>(v);
                   });
  if (auto node = make_node<GeluBackwardBackward>({&grad, &x}, a)) {
    if (node->needs_input_grad(1)) node->grad_in.save(grad);
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// gelu
//   forward:   exact  y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
//              tanh   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   backward:  grad_x = grad * gelu'(x)      (fused kernel, itself differentiable)
//              exact  gelu'(x) = Phi(x) + x phi(x)
//              tanh   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//              saves x
struct GeluBackward final : Node {
  SavedTensor x{this};
  GeluApproximate approximate;
  explicit GeluBackward(GeluApproximate a) : approximate(a) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {gelu_backward(grad, x.get(), approximate)};
  }
  const char* name() const override { return "GeluBackward"; }
};

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  // One loop per form, so the form is a constant inside it and the loop vectorises.
  Tensor y = approximate == GeluApproximate::None
                 ? kernels::map_float("gelu", x,
                                      [](auto v) { return gelu_value<GeluApproximate::None>(v); })
                 : kernels::map_float("gelu", x,
                                      [](auto v) { return gelu_value<GeluApproximate::Tanh>(v); });
  if (auto node = make_node<GeluBackward>({&x}, approximate)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// gelu_composite: the same formulas from primitive ops (their backward comes from theirs)
Tensor gelu_composite(const Tensor& x, GeluApproximate approximate) {
  if (approximate == GeluApproximate::None) return x * 0.5 * (1.0 + erf(x * kSqrt1_2));
  return x * 0.5 * (1.0 + tanh((x + x * x * x * kKappa) * kSqrt2OverPi));
}

// ----------------------------------------------------------------------------
// silu
//   forward:   y = x sigmoid(x)   (NOTE: written as x e^x / (1 + e^x) for x < 0: no overflow)
//   backward:  grad_x = grad * s (1 + x (1 - s)),  s = sigmoid(x)      saves x
struct SiluBackward final : Node {
  SavedTensor x{this};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get();
    Tensor s = sigmoid(xv);
    return {grad * s * (1.0 + xv * (1.0 - s))};
  }
  const char* name() const override { return "SiluBackward"; }
};

Tensor silu(const Tensor& x) {
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
