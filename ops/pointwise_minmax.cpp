// Bounds: clamp and the elementwise maximum/minimum (declared in pointwise.h). Every backward is
// written with ops, so gradients of gradients work.
#include <cmath>
#include <limits>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduced_float.h"

namespace nabla {

// ----------------------------------------------------------------------------
// clamp
//   forward:   y = min(max(x, min), max)   (NaN stays NaN; min > max gives max everywhere)
//   backward:  grad_x = grad where min <= x <= max, else 0      saves that bool mask
struct ClampBackward final : Node {
  SavedTensor inside{this, "inside"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {where(inside.get(), grad, 0.0)};
  }
  const char* name() const override { return "ClampBackward"; }
};

namespace {

void check_integral_bound(const Tensor& x, double bound) {
  // NOTE: 2^63 itself is out of range; every double below it converts exactly.
  constexpr double kLimit = 9223372036854775808.0;
  if (std::floor(bound) != bound || bound < -kLimit || bound >= kLimit)
    throw DTypeError(fmt::format("clamp: bound {} is not an int64 value, but the input is int64 {}",
                                 bound, shape_str(x.shape())));
}

// y = x clamped to [min, max] in x's dtype (no autograd); a missing bound is -inf (+inf), or
// int64's lowest (highest). Selects, not a NaN test and optionals per element: NaN fails both
// compares and stays NaN, and min > max gives max everywhere, as in PyTorch. The bounds are
// locals of the loop: read through the lambda's references, every store to y could change them,
// and the loop reloaded them and did not vectorise (0.32 ms for 460K floats, Zen 4).
Tensor clamp_kernel(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  Tensor y = empty(x.shape(), x.dtype());
  std::array<Shape, 2> st = {y.strides(), x.strides()};
  dispatch_numeric(x.dtype(), "clamp", [&](auto tag) {
    using T = decltype(tag);
    using Limits = std::numeric_limits<T>;
    const T lowest = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
    const T highest = Limits::has_infinity ? Limits::infinity() : Limits::max();
    const T lo = min ? static_cast<T>(*min) : lowest;
    const T hi = max ? static_cast<T>(*max) : highest;
    T* yp = y.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    strided_for_each<2>(
        x.shape(), st, 1,
        [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
          T* yo = yp + o[0];
          const T* xo = xp + o[1];
          const T low = lo, high = hi;
          if (s[0] == 1 && s[1] == 1) {
            for (int64_t i = 0; i < n; ++i) {
              const T r = xo[i] < low ? low : xo[i];
              yo[i] = r > high ? high : r;
            }
          } else {
            for (int64_t i = 0; i < n; ++i) {
              const T r = xo[i * s[1]] < low ? low : xo[i * s[1]];
              yo[i * s[0]] = r > high ? high : r;
            }
          }
        });
  });
  return y;
}

}  // namespace

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (reduced::any(x))
    return reduced::in_float32(
        "clamp", [&](const Tensor& x32) { return clamp(x32, min, max); }, x);
  inspect::OpScope op_scope("clamp", {&x});
  if (!min && !max)
    throw ValueError(fmt::format("clamp: at least one of min and max must be given (input {})",
                                 shape_str(x.shape())));
  if (x.dtype() == kInt64) {
    if (min) check_integral_bound(x, *min);
    if (max) check_integral_bound(x, *max);
  }
  Tensor y = clamp_kernel(x, min, max);
  if (auto node = make_node<ClampBackward>({&x})) {
    Tensor inside;
    if (min && max)
      inside = logical_and(ge(x, *min), le(x, *max));
    else
      inside = min ? ge(x, *min) : le(x, *max);
    node->inside.save(inside);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// maximum / minimum
//   forward:   y = max(a, b) (or min), broadcast; NaN in either input gives NaN
//   backward:  grad_a = grad * w_a, grad_b = grad * w_b, where the winner gets weight 1, the
//              loser 0, both 1/2 at a tie, and both 1 when the output is NaN (as in PyTorch)
//              saves a and b
namespace {

// Weight of `self` against `other` for maximum (IsMax) or minimum, in the broadcast shape.
template <bool IsMax>
Tensor tie_weight(const Tensor& self, const Tensor& other) {
  // Selects, not branches, in both kernels: GCC then vectorises them (-fno-trapping-math).
  return kernels::map_binary_float(IsMax ? "maximum" : "minimum", self, other, [](auto s, auto o) {
    using T = decltype(s);
    const T lost_or_won = (IsMax ? s < o : s > o) ? T(0) : T(1);  // 1: s wins, or a NaN is involved
    return s == o ? T(0.5) : lost_or_won;
  });
}

template <bool IsMax>
Tensor extremum(const char* op, const Tensor& a, const Tensor& b) {
  return kernels::map_binary_numeric(op, a, b, [](auto u, auto v) {
    using T = decltype(u);
    const T winner = (IsMax ? u > v : u < v) ? u : v;
    if constexpr (std::is_floating_point_v<T>) {
      const T unless_v_nan = v != v ? v : winner;
      return u != u ? u : unless_v_nan;  // NaN in either input gives NaN
    }
    return winner;
  });
}

}  // namespace

template <bool IsMax>
struct ExtremumBackward final : Node {
  SavedTensor a{this, "a"}, b{this, "b"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor av = a.get(), bv = b.get();
    return {needs_input_grad(0) ? mul(grad, tie_weight<IsMax>(av, bv)) : Tensor(),
            needs_input_grad(1) ? mul(grad, tie_weight<IsMax>(bv, av)) : Tensor()};
  }
  const char* name() const override { return IsMax ? "MaximumBackward" : "MinimumBackward"; }
};

Tensor maximum(const Tensor& a, const Tensor& b) {
  if (reduced::any(a, b))
    return reduced::in_float32(
        "maximum", [](const Tensor& a32, const Tensor& b32) { return maximum(a32, b32); }, a, b);
  inspect::OpScope op_scope("maximum", {&a, &b});
  Tensor y = extremum<true>("maximum", a, b);
  if (auto node = make_node<ExtremumBackward<true>>({&a, &b})) {
    node->a.save(a);
    node->b.save(b);
    set_history(y, node);
  }
  return y;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  if (reduced::any(a, b))
    return reduced::in_float32(
        "minimum", [](const Tensor& a32, const Tensor& b32) { return minimum(a32, b32); }, a, b);
  inspect::OpScope op_scope("minimum", {&a, &b});
  Tensor y = extremum<false>("minimum", a, b);
  if (auto node = make_node<ExtremumBackward<false>>({&a, &b})) {
    node->a.save(a);
    node->b.save(b);
    set_history(y, node);
  }
  return y;
}

}  // namespace nabla
