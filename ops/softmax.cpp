// The softmax family. Kernels view x as (outer, n, inner) around the softmax dim and run one row
// (n elements, stride `inner`) per task; softmax over the last dim (inner == 1) is the contiguous
// fast path. Row sums accumulate in double. Each backward runs a fused kernel, except under
// create_graph, where the same formula is written with ops so that higher derivatives work.
#include "ops/softmax.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/vec_math.h"

namespace nabla {
namespace {

// x viewed as (outer, n, inner) around `dim`; a 0-d x is one row of one element.
struct DimLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

DimLayout dim_layout(const Shape& s, int64_t dim) {
  DimLayout l;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d < dim) {
      l.outer *= s[d];
    } else if (d == dim) {
      l.n = s[d];
    } else {
      l.inner *= s[d];
    }
  }
  return l;
}

// Calls f(offset of the row's first element) for each of the outer * inner rows.
template <class F>
void for_each_row(const DimLayout& l, int64_t cost, F&& f) {
  parallel_for(l.outer * l.inner, l.n * cost, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f((r / l.inner) * l.n * l.inner + r % l.inner);
  });
}

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// One row of softmax / log_softmax. NOTE: the row max is subtracted first, so exp never
// overflows; a row of only -inf gives NaN, as in PyTorch. The `omp simd` reductions let the
// compiler reorder the sums and the max across vector lanes (plain loops must keep their order).
template <class T, bool Log, bool Contig>
void softmax_row(const T* __restrict x, T* __restrict y, int64_t n, int64_t stride) {
  const int64_t st = Contig ? 1 : stride;
  T m = kNegInf<T>;
#pragma omp simd reduction(max : m)
  for (int64_t k = 0; k < n; ++k) m = x[k * st] > m ? x[k * st] : m;
  double s = 0;
  if constexpr (Log) {
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; ++k) s += static_cast<double>(vec_math::exp_t<T>(x[k * st] - m));
    const T lse = static_cast<T>(std::log(s));
    for (int64_t k = 0; k < n; ++k) y[k * st] = x[k * st] - m - lse;
  } else {
    // Two loops (a map, then a sum) vectorise where the fused one does not.
    for (int64_t k = 0; k < n; ++k) y[k * st] = vec_math::exp_t<T>(x[k * st] - m);
    T inv;
    if constexpr (std::is_same_v<T, float>) {
      // NOTE: float lanes, not double: the terms are in (0, 1] and one of them is 1, so each
      // lane's partial sum loses at most n/16 ulp; double sums ran at half the vector width.
      float sf = 0;
#pragma omp simd reduction(+ : sf)
      for (int64_t k = 0; k < n; ++k) sf += y[k * st];
      inv = 1.0f / sf;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t k = 0; k < n; ++k) s += static_cast<double>(y[k * st]);
      inv = static_cast<T>(1.0 / s);
    }
    for (int64_t k = 0; k < n; ++k) y[k * st] *= inv;
  }
}

// One row of the backward: softmax:     grad_x = y * (g - sum(g * y))
//                          log_softmax: grad_x = g - exp(y) * sum(g)
template <class T, bool Log, bool Contig>
void softmax_backward_row(const T* y, const T* g, T* gx, int64_t n, int64_t stride) {
  const int64_t st = Contig ? 1 : stride;
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < n; ++k)
    acc += static_cast<double>(Log ? g[k * st] : g[k * st] * y[k * st]);
  const T a = static_cast<T>(acc);
  for (int64_t k = 0; k < n; ++k)
    gx[k * st] = Log ? g[k * st] - vec_math::exp_t<T>(y[k * st]) * a : y[k * st] * (g[k * st] - a);
}

template <bool Log>
Tensor softmax_kernel(const Tensor& x_in, int64_t dim) {
  Tensor x = x_in.detach().contiguous();
  Tensor y = empty(x.shape(), x.dtype());
  const DimLayout l = dim_layout(x.shape(), dim);
  dispatch_float(x.dtype(), Log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for_each_row(l, 8, [&](int64_t o) {
      if (l.inner == 1) {
        softmax_row<T, Log, true>(xp + o, yp + o, l.n, 1);
      } else {
        softmax_row<T, Log, false>(xp + o, yp + o, l.n, l.inner);
      }
    });
  });
  return y;
}

template <bool Log>
Tensor softmax_backward_kernel(const Tensor& y_in, const Tensor& grad_in, int64_t dim) {
  Tensor y = y_in.detach().contiguous(), g = grad_in.detach().contiguous();
  Tensor gx = empty(y.shape(), y.dtype());
  const DimLayout l = dim_layout(y.shape(), dim);
  dispatch_float(y.dtype(), Log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* yp = y.data_ptr<T>();
    const T* gp = g.data_ptr<T>();
    T* gxp = gx.data_ptr<T>();
    for_each_row(l, 4, [&](int64_t o) {
      if (l.inner == 1) {
        softmax_backward_row<T, Log, true>(yp + o, gp + o, gxp + o, l.n, 1);
      } else {
        softmax_backward_row<T, Log, false>(yp + o, gp + o, gxp + o, l.n, l.inner);
      }
    });
  });
  return gx;
}

// grad_x = y * (grad - sum(grad * y, dim)): the kernel, or ops when the backward is recorded.
Tensor softmax_grad(const Tensor& grad, const Tensor& y, int64_t dim) {
  if (GradMode::enabled()) return mul(y, sub(grad, sum(mul(grad, y), {dim}, true)));
  return softmax_backward_kernel<false>(y, grad, dim);
}

// Per-row max along `dim`, detached, keepdim shape. Subtracting it changes neither softmax's
// value nor its gradient (softmax is shift-invariant) and keeps exp from overflowing.
Tensor row_max_detached(const Tensor& x_in, int64_t dim) {
  Tensor x = x_in.detach().contiguous();
  Shape out_shape = x.shape();
  if (!out_shape.empty()) out_shape[static_cast<size_t>(dim)] = 1;
  Tensor m = empty(out_shape, x.dtype());
  const DimLayout l = dim_layout(x.shape(), dim);
  dispatch_float(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* mp = m.data_ptr<T>();
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t i = 0; i < l.inner; ++i) {
        T v = kNegInf<T>;
        for (int64_t k = 0; k < l.n; ++k) v = std::max(v, xp[(o * l.n + k) * l.inner + i]);
        mp[o * l.inner + i] = v;
      }
  });
  return m;
}

}  // namespace

// ----------------------------------------------------------------------------
// softmax
//   forward:   y = exp(x - max) / sum(exp(x - max))       along dim
//   backward:  grad_x = y * (grad - sum(grad * y, dim))    saves the output y
struct SoftmaxBackward final : Node {
  SavedTensor y{this};
  int64_t dim;
  explicit SoftmaxBackward(int64_t d) : dim(d) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {softmax_grad(grad, y.get(), dim)};
  }
  const char* name() const override { return "SoftmaxBackward"; }
};

Tensor softmax(const Tensor& x, int64_t dim) {
  dim = normalize_dim("softmax", dim, x.dim());
  Tensor y = softmax_kernel<false>(x, dim);
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
struct LogSoftmaxBackward final : Node {
  SavedTensor y{this};
  int64_t dim;
  explicit LogSoftmaxBackward(int64_t d) : dim(d) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor yv = y.get();
    if (GradMode::enabled()) return {sub(grad, mul(exp(yv), sum(grad, {dim}, true)))};
    return {softmax_backward_kernel<true>(yv, grad, dim)};
  }
  const char* name() const override { return "LogSoftmaxBackward"; }
};

Tensor log_softmax(const Tensor& x, int64_t dim) {
  dim = normalize_dim("log_softmax", dim, x.dim());
  Tensor y = softmax_kernel<true>(x, dim);
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

template <class T>
bool live(const T* z, const bool* keep, int64_t k) {
  return (keep == nullptr || keep[k]) && z[k] != kNegInf<T>;
}

}  // namespace

struct MaskedSoftmaxBackward final : Node {
  SavedTensor y{this};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor yv = y.get();
    Tensor grad_x = softmax_grad(grad, yv, yv.dim() - 1);
    return {grad_x, grad_x};  // z = x + mask for an additive mask; a bool mask has no edge
  }
  const char* name() const override { return "MaskedSoftmaxBackward"; }
};

Tensor masked_softmax(const Tensor& x, const Tensor& mask, MaskKind kind) {
  check_mask(x, mask, kind);
  auto [z, keep] = masked_logits(x, mask, kind);
  Tensor y = empty(x.shape(), x.dtype());
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  dispatch_float(x.dtype(), "masked_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    const bool* kp = keep.defined() ? keep.data_ptr<bool>() : nullptr;
    T* yp = y.data_ptr<T>();
    parallel_for(rows, n * 8, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* zr = zp + r * n;
        const bool* kr = kp ? kp + r * n : nullptr;
        T* yr = yp + r * n;
        T m = kNegInf<T>;
        bool any = false;
        for (int64_t k = 0; k < n; ++k)
          if (live(zr, kr, k)) {
            any = true;
            m = std::max(m, zr[k]);
          }
        double s = 0;
        for (int64_t k = 0; k < n; ++k) {
          yr[k] = any && live(zr, kr, k) ? std::exp(zr[k] - m) : T(0);
          s += static_cast<double>(yr[k]);
        }
        const T inv = any ? static_cast<T>(1.0 / s) : T(0);
        for (int64_t k = 0; k < n; ++k) yr[k] *= inv;
      }
    });
  });
  if (auto node = make_node<MaskedSoftmaxBackward>({&x, &mask})) {
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens) {
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
Tensor softmax_composite(const Tensor& x, int64_t dim) {
  dim = normalize_dim("softmax", dim, x.dim());
  Tensor e = exp(sub(x, row_max_detached(x, dim)));
  return div(e, sum(e, {dim}, true));
}

Tensor log_softmax_composite(const Tensor& x, int64_t dim) {
  dim = normalize_dim("log_softmax", dim, x.dim());
  Tensor z = sub(x, row_max_detached(x, dim));
  return sub(z, log(sum(exp(z), {dim}, true)));
}

// e = exp(z - shift) * live; y = e / (sum(e) + [sum(e) == 0]). The detached per-element shift is
// the row max over live positions there, and z itself (finite) or 0 at dead positions so exp
// stays finite. NOTE: assumes finite logits at masked positions of a Bool mask.
Tensor masked_softmax_composite(const Tensor& x, const Tensor& mask, MaskKind kind) {
  check_mask(x, mask, kind);
  Tensor z = kind == MaskKind::Additive ? add(x, mask) : x;
  auto [zd, keep] = masked_logits(x, mask, kind);
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
        if (live(zr, kr, k)) m = std::max(m, zr[k]);
      for (int64_t k = 0; k < n; ++k) {
        const bool on = live(zr, kr, k);
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
