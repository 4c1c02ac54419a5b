// clamp by tensors, lerp and atan2. Each backward is written with ops (gradients of any order);
// masks are constants of the backward computed from saved tensors.
#include "nabla/ops/interpolation.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/unary.h"

namespace nabla {

// ----------------------------------------------------------------------------
// clamp (tensor bounds)
//   forward:   y = min(max(x, min), max), broadcast; NaN in x stays NaN
//   backward:  (PyTorch's clamp_backward_min_max, tools/autograd/FunctionsManual.cpp)
//              grad_x   = grad where min <= x <= max
//              grad_min = grad where x < min and min < max
//              grad_max = grad where x > max or max < min      saves x, min, max
struct ClampTensorBackward final : Node {
  SavedTensor x{this, "x"}, lo{this, "min"}, hi{this, "max"};
  bool has_lo, has_hi;
  ClampTensorBackward(bool l, bool h) : has_lo(l), has_hi(h) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get().detach();
    Tensor l = has_lo ? lo.get().detach() : Tensor(), h = has_hi ? hi.get().detach() : Tensor();
    Tensor ge_lo = has_lo ? ge(xv, l) : Tensor(), le_hi = has_hi ? le(xv, h) : Tensor();
    Tensor gx, gl, gh;
    if (needs_input_grad(0)) {
      Tensor inside = has_lo && has_hi ? logical_and(ge_lo, le_hi) : has_lo ? ge_lo : le_hi;
      gx = where(inside, grad, 0.0);
    }
    size_t i = 1;
    if (has_lo && needs_input_grad(i++)) {
      Tensor pred = logical_not(ge_lo);
      if (has_hi) pred = logical_and(lt(xv, l), lt(l, h));
      gl = where(pred, grad, 0.0);
    }
    if (has_hi && needs_input_grad(i)) {
      Tensor pred = logical_not(le_hi);
      if (has_lo) pred = logical_or(gt(xv, h), lt(h, l));
      gh = where(pred, grad, 0.0);
    }
    std::vector<Tensor> out = {gx};
    if (has_lo) out.push_back(gl);
    if (has_hi) out.push_back(gh);
    return out;
  }
  const char* name() const override { return "ClampTensorBackward"; }
};

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  inspect::OpScope op_scope("clamp", {&x, &min, &max});
  const bool has_lo = min.defined(), has_hi = max.defined();
  if (!has_lo && !has_hi)
    throw ValueError(
        fmt::format("clamp: at least one of the tensors min and max must be given "
                    "(input {})",
                    shape_str(x.shape())));
  auto lower = [](auto v, auto m) {
    if constexpr (std::is_floating_point_v<decltype(v)>)
      if (std::isnan(v)) return v;
    return v < m ? m : v;
  };
  auto upper = [](auto v, auto m) {
    if constexpr (std::is_floating_point_v<decltype(v)>)
      if (std::isnan(v)) return v;
    return v > m ? m : v;
  };
  Tensor y = x;
  if (has_lo) y = kernels::map_binary_numeric("clamp", y, min, lower);
  if (has_hi) y = kernels::map_binary_numeric("clamp", y, max, upper);
  std::shared_ptr<ClampTensorBackward> node;
  if (has_lo && has_hi)
    node = make_node<ClampTensorBackward>({&x, &min, &max}, true, true);
  else if (has_lo)
    node = make_node<ClampTensorBackward>({&x, &min}, true, false);
  else
    node = make_node<ClampTensorBackward>({&x, &max}, false, true);
  if (node) {
    node->x.save(x);
    if (has_lo) node->lo.save(min);
    if (has_hi) node->hi.save(max);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// lerp
//   forward:   y = |w| < 0.5 ? start + w (end - start) : end - (end - start)(1 - w)
//   backward:  grad_start = grad (1 - w), grad_end = grad w, grad_w = grad (end - start)
//              saves w; start and end if w needs grad
struct LerpBackward final : Node {
  SavedTensor start{this, "start"}, end{this, "end"}, w{this, "weight"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor wv = w.get();
    Tensor gs = needs_input_grad(0) ? mul(grad, sub(1.0, wv)) : Tensor();
    Tensor gend = needs_input_grad(1) ? mul(grad, wv) : Tensor();
    Tensor gw = needs_input_grad(2) ? mul(grad, sub(end.get(), start.get())) : Tensor();
    return {gs, gend, gw};
  }
  const char* name() const override { return "LerpBackward"; }
};

namespace {

Tensor lerp_kernel(const Tensor& start, const Tensor& end, const Tensor& weight) {
  kernels::check_same_dtype("lerp", start, end);
  kernels::check_same_dtype("lerp", start, weight);
  Shape shape;
  try {
    shape = broadcast_shapes("lerp", broadcast_shapes("lerp", start.shape(), end.shape()),
                             weight.shape());
  } catch (const ShapeError&) {
    throw ShapeError(
        fmt::format("lerp: start {}, end {} and weight {} cannot be broadcast together",
                    shape_str(start.shape()), shape_str(end.shape()), shape_str(weight.shape())));
  }
  Tensor y = empty(shape, start.dtype());
  std::array<Shape, 4> st = {y.strides(), broadcast_strides(start.shape(), start.strides(), shape),
                             broadcast_strides(end.shape(), end.strides(), shape),
                             broadcast_strides(weight.shape(), weight.strides(), shape)};
  dispatch_float(start.dtype(), "lerp", [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    const T* sp = start.data_ptr<T>();
    const T* ep = end.data_ptr<T>();
    const T* wp = weight.data_ptr<T>();
    strided_for_each<4>(
        shape, st, 2,
        [&](const std::array<int64_t, 4>& o, int64_t n, const std::array<int64_t, 4>& s) {
          for (int64_t i = 0; i < n; ++i) {
            const T a = sp[o[1] + i * s[1]], b = ep[o[2] + i * s[2]], w = wp[o[3] + i * s[3]];
            // PyTorch's two-sided form (aten/src/ATen/native/Lerp.h): exact at w = 0 and w = 1.
            yp[o[0] + i * s[0]] = std::abs(w) < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
          }
        });
  });
  return y;
}

}  // namespace

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  inspect::OpScope op_scope("lerp", {&start, &end, &weight});
  Tensor y = lerp_kernel(start, end, weight);
  if (auto node = make_node<LerpBackward>({&start, &end, &weight})) {
    node->w.save(weight);
    if (node->needs_input_grad(2)) {
      node->start.save(start);
      node->end.save(end);
    }
    set_history(y, node);
  }
  return y;
}

Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  return lerp(start, end, kernels::scalar_like("lerp", start, weight));
}

// ----------------------------------------------------------------------------
// atan2
//   forward:   y = atan2(a, b)
//   backward:  grad_a = grad * b / (a^2 + b^2), grad_b = -grad * a / (a^2 + b^2)      saves a, b
struct Atan2Backward final : Node {
  SavedTensor a{this, "a"}, b{this, "b"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor av = a.get(), bv = b.get();
    Tensor scaled = div(grad, add(square(av), square(bv)));
    return {needs_input_grad(0) ? mul(scaled, bv) : Tensor(),
            needs_input_grad(1) ? neg(mul(scaled, av)) : Tensor()};
  }
  const char* name() const override { return "Atan2Backward"; }
};

Tensor atan2(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("atan2", {&a, &b});
  Tensor y =
      kernels::map_binary_float("atan2", a, b, [](auto u, auto v) { return std::atan2(u, v); });
  if (auto node = make_node<Atan2Backward>({&a, &b})) {
    node->a.save(a);
    node->b.save(b);
    set_history(y, node);
  }
  return y;
}

}  // namespace nabla
