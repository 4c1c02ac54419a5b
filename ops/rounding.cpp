// Rounding and remainders. The rounding ops are piecewise constant: their gradient is zero, as
// in PyTorch (tools/autograd/derivatives.yaml). fmod/remainder backward is written with ops; the
// quotient it needs is piecewise constant, so it is computed as a constant of the backward.
#include "nabla/ops/rounding.h"

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/kernel_helpers.h"

namespace nabla {

// ----------------------------------------------------------------------------
// floor / ceil / round
//   forward:   y = floor(x), ceil(x), or x rounded to nearest with halves to even
//   backward:  grad_x = 0
struct RoundingBackward final : Node {
  const char* op;
  explicit RoundingBackward(const char* o) : op(o) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {zeros_like(grad)}; }
  const char* name() const override { return op; }
};

namespace {

template <class F>
Tensor rounding(const char* op, const char* node_name, const Tensor& x, F f) {
  inspect::OpScope op_scope(op, {&x});
  Tensor y = kernels::map_unary<false>(op, x, [f](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      return f(v);
    } else {
      return v;  // an integer is already rounded
    }
  });
  if (auto node = make_node<RoundingBackward>({&x}, node_name)) set_history(y, node);
  return y;
}

}  // namespace

Tensor floor(const Tensor& x) {
  return rounding("floor", "FloorBackward", x, [](auto v) { return std::floor(v); });
}
Tensor ceil(const Tensor& x) {
  return rounding("ceil", "CeilBackward", x, [](auto v) { return std::ceil(v); });
}
// std::nearbyint rounds in the current mode, round-to-nearest-even by default (C11 7.12.9.3),
// which is PyTorch's rule (torch.round follows numpy.round).
Tensor round(const Tensor& x) {
  return rounding("round", "RoundBackward", x, [](auto v) { return std::nearbyint(v); });
}

// ----------------------------------------------------------------------------
// fmod / remainder
//   forward:   fmod:      y = a - trunc(a / b) * b   (C's fmod, exact; sign of a)
//              remainder: y = a - floor(a / b) * b   (Python's %; sign of b)
//   backward:  grad_a = grad, grad_b = -grad * q with q = trunc(a / b) or floor(a / b)
//              saves a and b (q is recomputed; it is piecewise constant)
namespace {

template <class T>
T python_mod(T a, T b) {
  // PyTorch's remainder kernel (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp): fmod, then move
  // a nonzero result whose sign differs from b's by one b.
  T m = std::fmod(a, b);
  if (m != T(0) && ((b < T(0)) != (m < T(0)))) m += b;
  return m;
}

}  // namespace

template <bool Floor>
struct ModBackward final : Node {
  SavedTensor a{this, "a"}, b{this, "b"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor bv = b.get();
    Tensor gb;
    if (needs_input_grad(1)) {
      Tensor q = kernels::map_binary_float(
          Floor ? "remainder" : "fmod", a.get().detach(), bv.detach(),
          [](auto u, auto v) { return Floor ? std::floor(u / v) : std::trunc(u / v); });
      gb = neg(mul(grad, q));
    }
    return {needs_input_grad(0) ? grad : Tensor(), gb};
  }
  const char* name() const override { return Floor ? "RemainderBackward" : "FmodBackward"; }
};

namespace {

template <bool Floor>
Tensor mod_op(const char* op, const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope(op, {&a, &b});
  Tensor y = kernels::map_binary_float(
      op, a, b, [](auto u, auto v) { return Floor ? python_mod(u, v) : std::fmod(u, v); });
  if (auto node = make_node<ModBackward<Floor>>({&a, &b})) {
    if (node->needs_input_grad(1)) {
      node->a.save(a);
      node->b.save(b);
    }
    set_history(y, node);
  }
  return y;
}

}  // namespace

Tensor fmod(const Tensor& a, const Tensor& b) { return mod_op<false>("fmod", a, b); }
Tensor fmod(const Tensor& a, double b) { return fmod(a, kernels::scalar_like("fmod", a, b)); }
Tensor remainder(const Tensor& a, const Tensor& b) { return mod_op<true>("remainder", a, b); }
Tensor remainder(const Tensor& a, double b) {
  return remainder(a, kernels::scalar_like("remainder", a, b));
}

}  // namespace nabla
