// The softmax family. Each section: the banner (math, what is saved), the plain reference kernel
// (one row at a time, as the banner reads: the code to study, and the oracle of the tests), the
// backward node, the forward. The tuned kernels in ops/kernels/softmax.h compute the same values
// faster; they run unless NABLA_KERNELS=reference (ops/kernels/kernels.h). x is viewed as
// (outer, n, inner) around the softmax dim (ops/row_layout.h): row r holds n elements, `inner`
// apart. Row sums accumulate in double; exps are vec_math::exp_t, in T's own precision (libm's
// for float64, a 2-ulp polynomial for float32: the tuned kernels' own, so that the two kinds of
// kernel differ only in the order of their sums). Each backward runs a kernel, except when grad
// mode is on (create_graph), where the same formula is written with ops so that higher
// derivatives work.
#include "nabla/ops/softmax.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/softmax.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/reduced_float.h"
#include "nabla/ops/row_layout.h"
#include "nabla/ops/unary.h"
#include "nabla/ops/vec_math.h"

namespace nabla {
using kernels::RowLayout;

// ----------------------------------------------------------------------------
// softmax
//   forward:   y = exp(x - max) / sum(exp(x - max))       along dim
//   backward:  grad_x = y * (grad - sum(grad * y, dim))    saves the output y
// NOTE: the row max is subtracted first, so exp never overflows (softmax is shift-invariant);
// a row of only -inf gives NaN, as in PyTorch.
namespace {

void softmax_reference(const Tensor& x, Tensor& y, const RowLayout& l) {
  dispatch_float(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for (int64_t r = 0; r < l.rows(); ++r) {
      const T* xr = xp + l.row_start(r);  // element k of the row is xr[k * l.inner]
      T* yr = yp + l.row_start(r);
      T m = kNegInf<T>;
      for (int64_t k = 0; k < l.n; ++k) m = std::max(m, xr[k * l.inner]);
      double s = 0;
      for (int64_t k = 0; k < l.n; ++k)
        s += static_cast<double>(vec_math::exp_t<T>(xr[k * l.inner] - m));
      for (int64_t k = 0; k < l.n; ++k)
        yr[k * l.inner] =
            static_cast<T>(static_cast<double>(vec_math::exp_t<T>(xr[k * l.inner] - m)) / s);
    }
  });
}

void softmax_backward_reference(const Tensor& y, const Tensor& g, Tensor& gx, const RowLayout& l) {
  dispatch_float(y.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T *yp = y.data_ptr<T>(), *gp = g.data_ptr<T>();
    T* gxp = gx.data_ptr<T>();
    for (int64_t r = 0; r < l.rows(); ++r) {
      const int64_t o = l.row_start(r);
      const T *yr = yp + o, *gr = gp + o;
      T* gxr = gxp + o;
      double dot = 0;  // sum(grad * y)
      for (int64_t k = 0; k < l.n; ++k)
        dot += static_cast<double>(gr[k * l.inner] * yr[k * l.inner]);
      for (int64_t k = 0; k < l.n; ++k)
        gxr[k * l.inner] = yr[k * l.inner] * (gr[k * l.inner] - static_cast<T>(dot));
    }
  });
}

// grad_x = y * (grad - sum(grad * y, dim)): a kernel, or ops when the backward is recorded.
// Shared with masked_softmax, whose y is 0 at masked positions.
Tensor softmax_grad(const Tensor& grad, const Tensor& y_in, int64_t dim) {
  if (GradMode::enabled()) return mul(y_in, sub(grad, sum(mul(grad, y_in), {dim}, true)));
  Tensor y = y_in.detach().contiguous(), g = grad.detach().contiguous();
  Tensor gx = empty(y.shape(), y.dtype());
  const RowLayout l = kernels::row_layout(y.shape(), dim);
  if (kernels::tuned_enabled()) {
    kernels::softmax_backward(y, g, gx, l, /*log=*/false);
  } else {
    softmax_backward_reference(y, g, gx, l);
  }
  return gx;
}

}  // namespace

struct SoftmaxBackward final : Node {
  SavedTensor y{this, "y"};
  int64_t dim;
  explicit SoftmaxBackward(int64_t d) : dim(d) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {softmax_grad(grad, y.get(), dim)};
  }
  const char* name() const override { return "SoftmaxBackward"; }
};

Tensor softmax(const Tensor& x, int64_t dim) {
  if (reduced::any(x))
    return reduced::in_float32(
        "softmax", [dim](const Tensor& x32) { return softmax(x32, dim); }, x);
  inspect::OpScope op_scope("softmax", {&x});
  dim = normalize_dim("softmax", dim, x.shape());
  Tensor xc = x.detach().contiguous(), y = empty(x.shape(), x.dtype());
  const RowLayout l = kernels::row_layout(x.shape(), dim);
  if (kernels::tuned_enabled()) {
    kernels::softmax_forward(xc, y, l, /*log=*/false);
  } else {
    softmax_reference(xc, y, l);
  }
  if (auto node = make_node<SoftmaxBackward>({&x}, dim)) {
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// log_softmax
//   forward:   y = x - max - log(sum(exp(x - max)))        along dim
//   backward:  grad_x = grad - exp(y) * sum(grad, dim)     saves the output y
namespace {

void log_softmax_reference(const Tensor& x, Tensor& y, const RowLayout& l) {
  dispatch_float(x.dtype(), "log_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for (int64_t r = 0; r < l.rows(); ++r) {
      const T* xr = xp + l.row_start(r);  // element k of the row is xr[k * l.inner]
      T* yr = yp + l.row_start(r);
      T m = kNegInf<T>;
      for (int64_t k = 0; k < l.n; ++k) m = std::max(m, xr[k * l.inner]);
      double s = 0;
      for (int64_t k = 0; k < l.n; ++k)
        s += static_cast<double>(vec_math::exp_t<T>(xr[k * l.inner] - m));
      const auto log_s = static_cast<T>(std::log(s));
      for (int64_t k = 0; k < l.n; ++k) yr[k * l.inner] = xr[k * l.inner] - m - log_s;
    }
  });
}

void log_softmax_backward_reference(const Tensor& y, const Tensor& g, Tensor& gx,
                                    const RowLayout& l) {
  dispatch_float(y.dtype(), "log_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T *yp = y.data_ptr<T>(), *gp = g.data_ptr<T>();
    T* gxp = gx.data_ptr<T>();
    for (int64_t r = 0; r < l.rows(); ++r) {
      const int64_t o = l.row_start(r);
      const T *yr = yp + o, *gr = gp + o;
      T* gxr = gxp + o;
      double total = 0;  // sum(grad)
      for (int64_t k = 0; k < l.n; ++k) total += static_cast<double>(gr[k * l.inner]);
      for (int64_t k = 0; k < l.n; ++k)
        gxr[k * l.inner] =
            gr[k * l.inner] - vec_math::exp_t<T>(yr[k * l.inner]) * static_cast<T>(total);
    }
  });
}

}  // namespace

struct LogSoftmaxBackward final : Node {
  SavedTensor y{this, "y"};
  int64_t dim;
  explicit LogSoftmaxBackward(int64_t d) : dim(d) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor yv = y.get();
    if (GradMode::enabled()) return {sub(grad, mul(exp(yv), sum(grad, {dim}, true)))};
    Tensor yc = yv.detach().contiguous(), g = grad.detach().contiguous();
    Tensor gx = empty(yc.shape(), yc.dtype());
    const RowLayout l = kernels::row_layout(yc.shape(), dim);
    if (kernels::tuned_enabled()) {
      kernels::softmax_backward(yc, g, gx, l, /*log=*/true);
    } else {
      log_softmax_backward_reference(yc, g, gx, l);
    }
    return {gx};
  }
  const char* name() const override { return "LogSoftmaxBackward"; }
};

Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (reduced::any(x))
    return reduced::in_float32(
        "log_softmax", [dim](const Tensor& x32) { return log_softmax(x32, dim); }, x);
  inspect::OpScope op_scope("log_softmax", {&x});
  dim = normalize_dim("log_softmax", dim, x.shape());
  Tensor xc = x.detach().contiguous(), y = empty(x.shape(), x.dtype());
  const RowLayout l = kernels::row_layout(x.shape(), dim);
  if (kernels::tuned_enabled()) {
    kernels::softmax_forward(xc, y, l, /*log=*/true);
  } else {
    log_softmax_reference(xc, y, l);
  }
  if (auto node = make_node<LogSoftmaxBackward>({&x}, dim)) {
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// masked_softmax (over the last dim)
//   forward:   z = x (Bool mask) or x + mask (Additive); a position is live if it is kept and
//              z > -inf; y = softmax of z over the live positions, 0 elsewhere
//   backward:  grad_x = y * (grad - sum(grad * y)), the softmax formula: y = 0 at dead positions
//              gives them zero gradient; grad_mask = grad_x for an additive mask   saves y
// NOTE: a row without any live position is all zeros with zero gradient. d2l's masked_softmax
// writes -1e6 into masked logits instead, which turns such a row into a uniform distribution
// over masked keys; we deliberately return zeros (no attention) and never NaN.
namespace {

void check_mask(const Tensor& x, const Tensor& mask, MaskKind kind) {
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("masked_softmax: x must be float32 or float64, got {} {}",
                                 dtype_name(x.dtype()), shape_str(x.shape())));
  if (x.dim() == 0) throw ShapeError("masked_softmax: x must have at least 1 dim, got ()");
  if (kind == MaskKind::Bool && mask.dtype() != kBool)
    throw DTypeError(fmt::format("masked_softmax: a Bool mask must have dtype bool, got {} {}",
                                 dtype_name(mask.dtype()), shape_str(mask.shape())));
  if (kind == MaskKind::Additive && mask.dtype() != x.dtype())
    throw DTypeError(
        fmt::format("masked_softmax: an additive mask must have x's dtype {}, got {} {}",
                    dtype_name(x.dtype()), dtype_name(mask.dtype()), shape_str(mask.shape())));
  if (broadcast_shapes("masked_softmax", mask.shape(), x.shape()) != x.shape())
    throw ShapeError(fmt::format("masked_softmax: mask of shape {} does not broadcast to x {}",
                                 shape_str(mask.shape()), shape_str(x.shape())));
}

// z = x or x + mask (contiguous, detached) and the kept mask (bool, contiguous; undefined when
// every position is kept).
std::pair<Tensor, Tensor> masked_logits(const Tensor& x, const Tensor& mask, MaskKind kind) {
  if (kind == MaskKind::Bool) return {x.detach().contiguous(), mask.expand(x.shape()).contiguous()};
  NoGradGuard no_grad;
  return {add(x.detach(), mask.detach()).contiguous(), Tensor()};
}

using kernels::is_live;  // kept by the mask and z > -inf

// One row of n at a time; the rows are contiguous (the mask is over the last dim).
void masked_softmax_reference(const Tensor& z, const Tensor& keep, Tensor& y, int64_t n) {
  const int64_t rows = n == 0 ? 0 : z.numel() / n;
  dispatch_float(z.dtype(), "masked_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    const bool* kp = keep.defined() ? keep.data_ptr<bool>() : nullptr;
    T* yp = y.data_ptr<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* zr = zp + r * n;
      const bool* kr = kp ? kp + r * n : nullptr;
      T* yr = yp + r * n;
      T m = kNegInf<T>;
      for (int64_t k = 0; k < n; ++k)
        if (is_live(zr, kr, k)) m = std::max(m, zr[k]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k)
        if (is_live(zr, kr, k)) s += static_cast<double>(std::exp(zr[k] - m));
      for (int64_t k = 0; k < n; ++k)
        yr[k] = is_live(zr, kr, k) ? static_cast<T>(static_cast<double>(std::exp(zr[k] - m)) / s)
                                   : T(0);
    }
  });
}

}  // namespace

struct MaskedSoftmaxBackward final : Node {
  SavedTensor y{this, "y"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor yv = y.get();
    Tensor grad_x = softmax_grad(grad, yv, yv.dim() - 1);
    return {grad_x, grad_x};  // z = x + mask for an additive mask; a bool mask has no edge
  }
  const char* name() const override { return "MaskedSoftmaxBackward"; }
};

Tensor masked_softmax(const Tensor& x, const Tensor& mask, MaskKind kind) {
  inspect::OpScope op_scope("masked_softmax", {&x, &mask});
  check_mask(x, mask, kind);
  auto [z, keep] = masked_logits(x, mask, kind);
  Tensor y = empty(x.shape(), x.dtype());
  if (kernels::tuned_enabled()) {
    kernels::masked_softmax_forward(z, keep, y, x.size(-1));
  } else {
    masked_softmax_reference(z, keep, y, x.size(-1));
  }
  if (auto node = make_node<MaskedSoftmaxBackward>({&x, &mask})) {
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens) {
  inspect::OpScope op_scope("masked_softmax", {&x, &valid_lens});
  if (valid_lens.dtype() != kInt64)
    throw DTypeError(fmt::format("masked_softmax: valid_lens must be int64, got {} {}",
                                 dtype_name(valid_lens.dtype()), shape_str(valid_lens.shape())));
  const int64_t nd = x.dim();
  const bool per_query = valid_lens.dim() == 2;
  const bool ok = nd >= 2 && (valid_lens.dim() == 1 || (per_query && nd >= 3)) &&
                  valid_lens.size(0) == x.size(0) &&
                  (!per_query || valid_lens.size(1) == x.size(-2));
  if (!ok)
    throw ShapeError(fmt::format(
        "masked_softmax: valid_lens {} must be (B,) or (B, Q) for x (B, ..., Q, K), got x {}",
        shape_str(valid_lens.shape()), shape_str(x.shape())));
  const std::vector<int64_t> lens = valid_lens.to_vector<int64_t>();
  for (size_t i = 0; i < lens.size(); ++i)
    if (lens[i] < 0)
      throw ValueError(
          fmt::format("masked_softmax: valid_lens has a negative length {} at {}", lens[i], i));
  // mask (B, 1, ..., Q or 1, K): position k of a row is kept if k < its valid length.
  const int64_t K = x.size(-1), Q = per_query ? x.size(-2) : 1;
  Shape mask_shape(static_cast<size_t>(nd), 1);
  mask_shape[0] = x.size(0);
  mask_shape[static_cast<size_t>(nd - 1)] = K;
  if (per_query) mask_shape[static_cast<size_t>(nd - 2)] = Q;
  Tensor mask = empty(mask_shape, kBool);
  bool* mp = mask.data_ptr<bool>();
  for (size_t row = 0; row < lens.size(); ++row)
    for (int64_t k = 0; k < K; ++k) mp[static_cast<int64_t>(row) * K + k] = k < lens[row];
  return masked_softmax(x, mask, MaskKind::Bool);
}

// ----------------------------------------------------------------------------
// Composite twins
namespace {

// Per-row max along `dim`, detached, keepdim shape. Subtracting it changes neither softmax's
// value nor its gradient (softmax is shift-invariant) and keeps exp from overflowing.
Tensor row_max_detached(const char* op, const Tensor& x_in, int64_t dim) {
  Tensor x = x_in.detach().contiguous();
  Shape out_shape = x.shape();
  if (!out_shape.empty()) out_shape[static_cast<size_t>(dim)] = 1;
  Tensor m = empty(out_shape, x.dtype());
  const RowLayout l = kernels::row_layout(x.shape(), dim);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* mp = m.data_ptr<T>();
    for (int64_t r = 0; r < l.rows(); ++r) {
      T v = kNegInf<T>;
      for (int64_t k = 0; k < l.n; ++k) v = std::max(v, xp[l.row_start(r) + k * l.inner]);
      mp[r] = v;
    }
  });
  return m;
}

}  // namespace
Tensor softmax_composite(const Tensor& x, int64_t dim) {
  inspect::OpScope op_scope("softmax_composite", {&x});
  dim = normalize_dim("softmax", dim, x.shape());
  Tensor e = exp(sub(x, row_max_detached("softmax", x, dim)));
  return div(e, sum(e, {dim}, true));
}

Tensor log_softmax_composite(const Tensor& x, int64_t dim) {
  inspect::OpScope op_scope("log_softmax_composite", {&x});
  dim = normalize_dim("log_softmax", dim, x.shape());
  Tensor z = sub(x, row_max_detached("log_softmax", x, dim));
  return sub(z, log(sum(exp(z), {dim}, true)));
}

// e = exp(z - shift) * live; y = e / (sum(e) + [sum(e) == 0]). The detached per-element shift is
// the row max over live positions there, and z itself (finite) or 0 at dead positions so exp
// stays finite. NOTE: assumes finite logits at masked positions of a Bool mask.
Tensor masked_softmax_composite(const Tensor& x, const Tensor& mask, MaskKind kind) {
  inspect::OpScope op_scope("masked_softmax_composite", {&x, &mask});
  check_mask(x, mask, kind);
  Tensor z = kind == MaskKind::Additive ? add(x, mask) : x;
  // Not a structured binding: clang 14 (the fuzz and tsan presets) cannot capture one.
  const std::pair<Tensor, Tensor> logits = masked_logits(x, mask, kind);
  const Tensor &zd = logits.first, &keep = logits.second;
  Tensor shift = empty(x.shape(), x.dtype()), livef = empty(x.shape(), x.dtype());
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  dispatch_float(x.dtype(), "masked_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = zd.data_ptr<T>();
    const bool* kp = keep.defined() ? keep.data_ptr<bool>() : nullptr;
    T *sp = shift.data_ptr<T>(), *lp = livef.data_ptr<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* zr = zp + r * n;
      const bool* kr = kp ? kp + r * n : nullptr;
      T m = kNegInf<T>;
      for (int64_t k = 0; k < n; ++k)
        if (is_live(zr, kr, k)) m = std::max(m, zr[k]);
      for (int64_t k = 0; k < n; ++k) {
        const bool on = is_live(zr, kr, k);
        lp[r * n + k] = on ? T(1) : T(0);
        sp[r * n + k] = on ? m : (std::isfinite(zr[k]) ? zr[k] : T(0));
      }
    }
  });
  Tensor e = mul(exp(sub(z, shift)), livef);
  Tensor s = sum(e, {-1}, true);
  return div(e, add(s, eq(s, 0.0).to(x.dtype())));
}

}  // namespace nabla
