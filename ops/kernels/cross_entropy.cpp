#include "nabla/ops/kernels/cross_entropy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "nabla/core/parallel.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/vec_math.h"

namespace nabla::kernels {
namespace {

// ---- forward: row log-sum-exp, many rows at a time
// A row is one position's C logits, with stride `inner`. The row's sum of exp(z - max) is
// accumulated in double in class order (the documented semantics): one row alone is a chain of
// dependent adds that runs at the add's latency, so these kernels run kLseLanes rows side by side,
// one per SIMD lane, each still summed in class order.
inline constexpr int kLseLanes = 16;  // rows side by side
inline constexpr int kLseBlock = 16;  // classes per transposed block (rows_lse)

// kLseLanes rows at rows[j] (C elements, stride 1 if Contig, else `stride`): per row the max m,
// lse = m + log(sum_c exp(z_c - m)) and (WithZsum) zsum = sum_c z_c, both sums in double.
// Each row's exps are computed along the row (vectorised), kLseBlock classes at a time, into a
// small buffer, which the sums then read across rows: the transposition that puts rows in lanes.
template <class T, bool Contig, bool WithZsum>
void rows_lse(const T* const* rows, int64_t C, int64_t stride, double* lse, double* zsum) {
  const int64_t st = Contig ? 1 : stride;
  alignas(64) T m[kLseLanes];
  for (int j = 0; j < kLseLanes; ++j) {
    const T* r = rows[j];
    T mj = kNegInf<T>;
    // The max is exact, so its order does not matter.
#pragma omp simd reduction(max : mj)
    for (int64_t c = 0; c < C; ++c) mj = r[c * st] > mj ? r[c * st] : mj;
    m[j] = mj;
  }
  alignas(64) double s[kLseLanes] = {}, zs[kLseLanes] = {};
  alignas(64) T e[kLseLanes][kLseBlock];
  int64_t c0 = 0;
  for (; c0 + kLseBlock <= C; c0 += kLseBlock) {
    for (int j = 0; j < kLseLanes; ++j) {
      const T* r = rows[j] + c0 * st;
      const T mj = m[j];
#pragma omp simd
      for (int k = 0; k < kLseBlock; ++k) e[j][k] = vec_math::exp_t<T>(r[k * st] - mj);
    }
    for (int k = 0; k < kLseBlock; ++k) {
#pragma omp simd
      for (int j = 0; j < kLseLanes; ++j) s[j] += static_cast<double>(e[j][k]);
    }
    if constexpr (WithZsum) {
      for (int k = 0; k < kLseBlock; ++k)
        for (int j = 0; j < kLseLanes; ++j) zs[j] += static_cast<double>(rows[j][(c0 + k) * st]);
    }
  }
  // The last C % kLseBlock classes, in order.
  for (int j = 0; j < kLseLanes; ++j) {
    for (int64_t c = c0; c < C; ++c) {
      s[j] += static_cast<double>(vec_math::exp_t<T>(rows[j][c * st] - m[j]));
      if constexpr (WithZsum) zs[j] += static_cast<double>(rows[j][c * st]);
    }
    lse[j] = static_cast<double>(m[j]) + std::log(s[j]);
    zsum[j] = zs[j];
  }
}

// kLseLanes consecutive positions of one outer index, z pointing at the first one's class 0:
// class c of lane j is z[c * inner + j], so the lanes are contiguous for every class (no
// transposition). Outputs as rows_lse.
template <class T, bool WithZsum>
void lanes_lse(const T* z, int64_t C, int64_t inner, double* lse, double* zsum) {
  alignas(64) T m[kLseLanes], e[kLseLanes];
  for (int j = 0; j < kLseLanes; ++j) m[j] = kNegInf<T>;
  for (int64_t c = 0; c < C; ++c) {
    const T* zc = z + c * inner;
#pragma omp simd
    for (int j = 0; j < kLseLanes; ++j) m[j] = zc[j] > m[j] ? zc[j] : m[j];
  }
  alignas(64) double s[kLseLanes] = {}, zs[kLseLanes] = {};
  for (int64_t c = 0; c < C; ++c) {
    const T* zc = z + c * inner;
    // Two loops (the exps, then the double sums) vectorise where the fused one does not.
#pragma omp simd
    for (int j = 0; j < kLseLanes; ++j) e[j] = vec_math::exp_t<T>(zc[j] - m[j]);
#pragma omp simd
    for (int j = 0; j < kLseLanes; ++j) s[j] += static_cast<double>(e[j]);
    if constexpr (WithZsum) {
#pragma omp simd
      for (int j = 0; j < kLseLanes; ++j) zs[j] += static_cast<double>(zc[j]);
    }
  }
  for (int j = 0; j < kLseLanes; ++j) {
    lse[j] = static_cast<double>(m[j]) + std::log(s[j]);
    zsum[j] = zs[j];
  }
}

// Calls f(p, lse, zsum) once for every position p (row) of z, laid out as l, in parallel (f must
// be safe to call from several threads for different p, and must not throw). zsum is 0 unless
// WithZsum.
template <class T, bool WithZsum, class F>
void for_each_row_lse(const T* z, const RowLayout& l, F&& f) {
  const int64_t outer = l.outer, C = l.n, inner = l.inner;
  constexpr int L = kLseLanes;
  const int64_t cost = C * L * 8;  // per tile
  if (inner >= L) {
    // Lanes along inner. The last tile of an outer index is shifted back to end at `inner`; its
    // positions that the previous tile already covered are not reported again.
    const int64_t tiles = (inner + L - 1) / L;  // per outer index
    parallel_for(outer * tiles, cost, [&](int64_t b, int64_t e) {
      alignas(64) double lse[L], zsum[L];
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / tiles, first = (t % tiles) * L, i0 = std::min(first, inner - L);
        lanes_lse<T, WithZsum>(z + o * C * inner + i0, C, inner, lse, zsum);
        for (int64_t i = first; i < i0 + L; ++i) f(o * inner + i, lse[i - i0], zsum[i - i0]);
      }
    });
    return;
  }
  // One row per position (contiguous when inner == 1). A last, partial tile repeats its last row
  // in the spare lanes and reports only its own positions.
  const int64_t P = outer * inner, tiles = (P + L - 1) / L;
  parallel_for(tiles, cost, [&](int64_t b, int64_t e) {
    alignas(64) double lse[L], zsum[L];
    const T* rows[L];
    for (int64_t t = b; t < e; ++t) {
      const int64_t p0 = t * L, n = std::min<int64_t>(L, P - p0);
      for (int64_t j = 0; j < L; ++j) {
        rows[j] = z + l.row_start(p0 + std::min(j, n - 1));
      }
      if (inner == 1) {
        rows_lse<T, true, WithZsum>(rows, C, 1, lse, zsum);
      } else {
        rows_lse<T, false, WithZsum>(rows, C, inner, lse, zsum);
      }
      for (int64_t j = 0; j < n; ++j) f(p0 + j, lse[j], zsum[j]);
    }
  });
}

template <class T>
void forward_impl(const Tensor& z_t, const Tensor& t, const RowLayout& l,
                  const CrossEntropyOptions& opts, std::vector<double>& per, double* lsep) {
  const bool probs = is_floating(t.dtype());
  const int64_t* tip = probs ? nullptr : t.data_ptr<int64_t>();
  const double eps = opts.label_smoothing, C = static_cast<double>(l.n);
  const T* zp = z_t.data_ptr<T>();
  const T* qp = probs ? t.data_ptr<T>() : nullptr;
  // Position p's loss from its row's lse (and, with smoothing, the sum of its logits).
  auto loss_at = [&](int64_t p, double lse_p, double zsum) {
    const int64_t base = l.row_start(p);
    const T* row = zp + base;
    if (probs) {
      double acc = 0;
      for (int64_t c = 0; c < l.n; ++c) {
        const int64_t k = c * l.inner;
        acc += ((1.0 - eps) * double(qp[base + k]) + eps / C) * (lse_p - double(row[k]));
      }
      per[static_cast<size_t>(p)] = acc;
      return;
    }
    const int64_t tc = tip[p];
    if (tc == opts.ignore_index) return;
    lsep[p] = lse_p;
    per[static_cast<size_t>(p)] =
        lsep[p] - (1.0 - eps) * double(row[tc * l.inner]) - eps / C * zsum;
  };
  if (!probs && eps != 0.0) {
    for_each_row_lse<T, true>(zp, l, loss_at);
  } else {
    for_each_row_lse<T, false>(zp, l, loss_at);
  }
}

// ---- backward
// The fused cross_entropy backward's constants: grad_z = g (softmax - (1 - eps) [c == t] - eps / C)
// with g = grad / scale.
struct CrossEntropyGrad {
  double smooth;  // eps / C
  double hit;     // 1 - eps
  double scale;   // count (Mean reduction) or 1
  int64_t ignore_index;
};

// a if keep, else +0.0, by masking a's bits. A select between computed floating-point values
// can be compiled as a branch around the computation (which stops vectorisation); a mask cannot.
template <class T>
T zero_unless(bool keep, T a) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  return std::bit_cast<T>(std::bit_cast<Bits>(a) & (keep ? ~Bits{0} : Bits{0}));
}

// One position's row of C contiguous classes (inner == 1). The exps go through `out` first: in
// one loop with the double arithmetic they do not vectorise. Subtracting 0.0 off target is exact,
// so subtracting zero_unless(c == target, hit) gives what `if (c == target) v -= hit` gave.
template <class T>
void cross_entropy_grad_row(const T* z, T* out, int64_t C, double lse, int64_t target, double g,
                            const CrossEntropyGrad& k) {
  const double smooth = k.smooth, hit = k.hit;  // locals: stores to out cannot change them
#pragma omp simd
  for (int64_t c = 0; c < C; ++c)
    out[c] = vec_math::exp_t<T>(static_cast<T>(static_cast<double>(z[c]) - lse));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const double v = static_cast<double>(out[c]) - smooth - zero_unless(c == target, hit);
    out[c] = static_cast<T>(g * v);
  }
}

// Class c of n consecutive positions of one outer index (inner > 1): z, out, lse, target and
// (PerPos) grad are all contiguous along the positions, which run in the SIMD lanes. Without
// PerPos every position's g is g_all.
template <class T, bool PerPos>
void cross_entropy_grad_class(const T* z, T* out, int64_t n, int64_t c, const double* lse,
                              const int64_t* target, const T* grad, double g_all,
                              const CrossEntropyGrad& k) {
  const double smooth = k.smooth, hit = k.hit, scale = k.scale;
  const int64_t ignore_index = k.ignore_index;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = vec_math::exp_t<T>(static_cast<T>(static_cast<double>(z[i]) - lse[i]));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double g = PerPos ? static_cast<double>(grad[i]) / scale : g_all;
    const double v = static_cast<double>(out[i]) - smooth - zero_unless(c == target[i], hit);
    out[i] = zero_unless(target[i] != ignore_index, static_cast<T>(g * v));
  }
}

template <class T>
void backward_impl(const Tensor& z, const Tensor& t, const double* lp, const Tensor& grad,
                   const RowLayout& l, const CrossEntropyOptions& opts, double count,
                   Tensor& grad_z) {
  const int64_t* tp = t.data_ptr<int64_t>();
  const bool per_pos = opts.reduction == Reduction::None;
  const double eps = opts.label_smoothing, scale = opts.reduction == Reduction::Mean ? count : 1;
  const CrossEntropyGrad k{eps / double(l.n), 1.0 - eps, scale, opts.ignore_index};
  const T* zp = z.data_ptr<T>();
  const T* gp = grad.data_ptr<T>();
  T* op = grad_z.data_ptr<T>();
  const int64_t C = l.n;
  if (l.inner == 1) {  // one contiguous row per position
    parallel_for(l.outer, C * 4, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        T* out = op + p * C;
        if (tp[p] == opts.ignore_index) {
          std::fill(out, out + C, T(0));
          continue;
        }
        const double g = (per_pos ? double(gp[p]) : double(gp[0])) / scale;
        cross_entropy_grad_row<T>(zp + p * C, out, C, lp[p], tp[p], g, k);
      }
    });
    return;
  }
  // One run of `inner` positions per (outer, class) pair.
  parallel_for(l.outer * C, l.inner * 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t pos = (r / C) * l.inner, off = r * l.inner, c = r % C;
      if (per_pos) {
        cross_entropy_grad_class<T, true>(zp + off, op + off, l.inner, c, lp + pos, tp + pos,
                                          gp + pos, 0.0, k);
      } else {
        cross_entropy_grad_class<T, false>(zp + off, op + off, l.inner, c, lp + pos, tp + pos,
                                           nullptr, double(gp[0]) / scale, k);
      }
    }
  });
}

}  // namespace

void cross_entropy_forward(const Tensor& z, const Tensor& target, const RowLayout& l,
                           const CrossEntropyOptions& opts, std::vector<double>& per, double* lse) {
  dispatch_float(z.dtype(), "cross_entropy",
                 [&](auto tag) { forward_impl<decltype(tag)>(z, target, l, opts, per, lse); });
}

void cross_entropy_backward(const Tensor& z, const Tensor& target, const double* lse,
                            const Tensor& grad, const RowLayout& l, const CrossEntropyOptions& opts,
                            double count, Tensor& grad_z) {
  dispatch_float(z.dtype(), "cross_entropy", [&](auto tag) {
    backward_impl<decltype(tag)>(z, target, lse, grad, l, opts, count, grad_z);
  });
}

}  // namespace nabla::kernels
