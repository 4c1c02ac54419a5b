// Fused scaled dot-product attention. Per head n (one slice of the leading dims):
//   Q (L, E), K (S, E), V (S, Ev);  s = scale Q K^T + mask (causal keys -> -inf)
//   P = softmax(s) by rows;  Z = dropout multipliers (keep / (1 - p), or 0);  O = (P * Z) V
//   lse = log(sum(exp(s))) per row
// Forward, per query tile: an online softmax over key tiles. With m the running row max and l the
//   running sum: acc = acc * exp(m_old - m) + (exp(s - m) * Z) V;  O = acc / l;  lse = m + log l.
// Backward, per head (FlashAttention-2's formulas): D = rowsum(dO * O), then per (key tile,
//   query tile): P = exp(s - lse), dV += (P Z)^T dO, dP = (dO V^T) Z, dS = P (dP - D),
//   dQ += scale dS K, dK += scale dS^T Q.
// Only score tiles of kQueryTile x kKeyTile live at a time, so memory is linear in L and S.
// Every operand, inputs and results alike, is read or written in place through its strides: the
// output and dq, dk, dv are laid out in memory like q, q, k, v. For heads split off a projection,
// (B, H, L, d) views of (B, L, H, d) memory, the output then merges back into (B, L, E) as a
// free view, and the gradients reach the projection without a copy.
#include "ops/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/dropout.h"
#include "ops/gemm.h"
#include "ops/linalg.h"
#include "ops/pointwise.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/vec_math.h"

namespace nabla {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 256;

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// The sizes and switches of one call. N is the product of the leading dims.
struct Problem {
  int64_t N = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1, p = 0;
  bool causal = false;
  uint64_t seed = 0, first = 0;  // dropout counters, as dropout() would reserve them
};

// Element offsets of each of the N leading-dim slices of t (any strides, including 0).
std::vector<int64_t> slice_offsets(const Tensor& t, int64_t N) {
  const int64_t nb = t.dim() - 2;
  std::vector<int64_t> off(static_cast<size_t>(N), 0);
  for (int64_t n = 0; n < N; ++n) {
    int64_t rest = n, o = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      o += (rest % t.size(d)) * t.stride(d);
      rest /= t.size(d);
    }
    off[static_cast<size_t>(n)] = o;
  }
  return off;
}

// A matrix operand the BLAS tiles can read in place: unit stride along the last dim and rows that
// do not overlap. Anything else is copied once.
Tensor gemm_ready(const Tensor& t) {
  const bool ok = t.stride(-1) == 1 || t.size(-1) <= 1;
  const bool rows_ok = t.size(-2) <= 1 || t.stride(-2) >= std::max<int64_t>(t.size(-1), 1);
  return ok && rows_ok ? t : t.contiguous();
}

int64_t row_stride(const Tensor& t) {
  return t.size(-2) <= 1 ? std::max<int64_t>(t.size(-1), 1) : t.stride(-2);
}

// A new tensor of `shape` whose dims lie in memory in the order of t's strides, the last dim
// innermost (ties keep the dim order): a result "like" t, as PyTorch's preserve_format gives.
Tensor empty_in_layout_of(const Tensor& t, const Shape& shape) {
  const int64_t nd = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(nd - 1));
  for (int64_t d = 0; d < nd - 1; ++d) order[static_cast<size_t>(d)] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  order.push_back(nd - 1);
  Shape physical, inverse(static_cast<size_t>(nd));
  for (size_t i = 0; i < order.size(); ++i) {
    physical.push_back(shape[static_cast<size_t>(order[i])]);
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  }
  return empty(physical, t.dtype()).permute(inverse);
}

// The N matrices (..., rows, cols) of an operand: element offsets of each leading-dim slice and
// the row stride (columns have unit stride).
template <class P>
struct Matrices {
  P base;
  std::vector<int64_t> off;
  int64_t ld;
  P at(int64_t n) const { return base + off[static_cast<size_t>(n)]; }
};

template <class T>
Matrices<const T*> readable(const Tensor& t, int64_t N) {
  return {t.data_ptr<T>(), slice_offsets(t, N), row_stride(t)};
}
template <class T>
Matrices<T*> writable(Tensor& t, int64_t N) {
  return {t.data_ptr<T>(), slice_offsets(t, N), row_stride(t)};
}

// The mask broadcast to (..., L, S) and read in place through its strides.
struct MaskView {
  enum class Kind { None, Keep, Additive } kind = Kind::None;
  const void* data = nullptr;
  std::vector<int64_t> offsets;
  int64_t stride_l = 0, stride_s = 0;
};

MaskView mask_view(const Tensor& mask, const Shape& full, int64_t N) {
  MaskView mv;
  if (!mask.defined()) return mv;
  Tensor m = mask.detach();
  while (m.dim() < static_cast<int64_t>(full.size())) m = m.unsqueeze(0);
  m = m.expand(full);
  mv.kind = m.dtype() == kBool ? MaskView::Kind::Keep : MaskView::Kind::Additive;
  mv.data = m.dtype() == kBool
                ? static_cast<const void*>(m.data_ptr<bool>())
                : (m.dtype() == kFloat32 ? static_cast<const void*>(m.data_ptr<float>())
                                         : static_cast<const void*>(m.data_ptr<double>()));
  mv.offsets = slice_offsets(m, N);
  mv.stride_l = m.stride(-2);
  mv.stride_s = m.stride(-1);
  return mv;
}

// C (m x n) = alpha op(A) op(B) + beta C, also for empty dims (BLAS rejects leading dims of 0).
template <class T>
void tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  blas::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Pointers of one call, per dtype.
template <class T>
struct Operands {
  Matrices<const T*> q, k, v;
  MaskView mask;
};

template <class T>
Operands<T> operands(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const Problem& pr) {
  Shape full(q.shape().begin(), q.shape().end() - 2);
  full.push_back(pr.L);
  full.push_back(pr.S);
  return {readable<T>(q, pr.N), readable<T>(k, pr.N), readable<T>(v, pr.N),
          mask_view(mask, full, pr.N)};
}

// Scores of rows [i0, i0 + rows) and keys [j0, j0 + cols) of head n into s (row stride kKeyTile):
// scale q k^T, plus the mask, with hidden keys at -inf.
template <class T>
void score_tile(const Operands<T>& op, const Problem& pr, int64_t n, int64_t i0, int64_t rows,
                int64_t j0, int64_t cols, T* s) {
  const auto nn = static_cast<size_t>(n);
  tile_gemm<T>(false, true, rows, cols, pr.E, static_cast<T>(pr.scale), op.q.at(n) + i0 * op.q.ld,
               op.q.ld, op.k.at(n) + j0 * op.k.ld, op.k.ld, T(0), s, kKeyTile);
  const MaskView& m = op.mask;
  for (int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * kKeyTile;
    const int64_t i = i0 + r;
    if (m.kind != MaskView::Kind::None) {
      const int64_t base = m.offsets[nn] + i * m.stride_l + j0 * m.stride_s;
      if (m.kind == MaskView::Kind::Keep) {
        const bool* mp = static_cast<const bool*>(m.data) + base;
        for (int64_t c = 0; c < cols; ++c)
          if (!mp[c * m.stride_s]) sr[c] = kNegInf<T>;
      } else {
        const T* mp = static_cast<const T*>(m.data) + base;
        for (int64_t c = 0; c < cols; ++c) sr[c] += mp[c * m.stride_s];
      }
    }
    if (pr.causal)
      for (int64_t c = std::max<int64_t>(0, i - j0 + 1); c < cols; ++c) sr[c] = kNegInf<T>;
  }
}

// z[r * kKeyTile + c] = 1 / (1 - p) if weight (n, i0 + r, j0 + c) is kept, else 0. Element e of
// the (N, L, S) weights uses word e % 4 of Philox block first + e / 4: the counters dropout()
// uses. A tile spanning every key is one run of counters, drawn in one call (Generator::blocks
// vectorises over long runs); `words` holds kQueryTile * kKeyTile + 8 words.
template <class T>
void dropout_tile(const Problem& pr, int64_t n, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                  T* z, uint32_t* words) {
  const Generator gen(pr.seed);
  const auto threshold = static_cast<uint64_t>(std::ceil(pr.p * 0x1.0p32));
  const T keep_scale = pr.p < 1 ? static_cast<T>(1.0 / (1.0 - pr.p)) : T(0);
  const bool one_run = cols == pr.S;
  const int64_t run_rows = one_run ? rows : 1, run = run_rows * cols;
  for (int64_t r0 = 0; r0 < rows; r0 += run_rows) {
    const auto e0 = static_cast<uint64_t>((n * pr.L + i0 + r0) * pr.S + j0);
    const auto skip = static_cast<int64_t>(e0 % 4);
    gen.blocks(pr.first + e0 / 4, (skip + run + 3) / 4, words);
    for (int64_t r = 0; r < run_rows; ++r) {
      const uint32_t* w = words + skip + r * cols;
      T* zr = z + (r0 + r) * kKeyTile;
      for (int64_t c = 0; c < cols; ++c)
        zr[c] = static_cast<uint64_t>(w[c]) >= threshold ? keep_scale : T(0);
    }
  }
}

template <class T>
void forward_kernel(const Operands<T>& op, const Problem& pr, const Matrices<T*>& out, T* lse) {
  const int64_t tiles = (pr.L + kQueryTile - 1) / kQueryTile;
  const int64_t cost = kQueryTile * pr.S * (pr.E + pr.Ev + 8);
  parallel_for(pr.N * tiles, cost, [&](int64_t b, int64_t e) {
    std::vector<T> s(kQueryTile * kKeyTile), z(pr.p > 0 ? kQueryTile * kKeyTile : 0);
    std::vector<uint32_t> words(pr.p > 0 ? kQueryTile * kKeyTile + 8 : 0);
    std::vector<T> row_max(kQueryTile);
    std::vector<double> row_sum(kQueryTile);
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / tiles, i0 = (t % tiles) * kQueryTile;
      const int64_t rows = std::min(kQueryTile, pr.L - i0);
      const int64_t ld = out.ld;
      T* acc = out.at(n) + i0 * ld;
      for (int64_t r = 0; r < rows; ++r) std::fill(acc + r * ld, acc + r * ld + pr.Ev, T(0));
      std::fill(row_max.begin(), row_max.end(), kNegInf<T>);
      std::fill(row_sum.begin(), row_sum.end(), 0.0);
      // Causal: the last row of the tile sees keys up to i0 + rows - 1.
      const int64_t key_end = pr.causal ? std::min(pr.S, i0 + rows) : pr.S;
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, key_end - j0);
        score_tile(op, pr, n, i0, rows, j0, cols, s.data());
        if (pr.p > 0) dropout_tile(pr, n, i0, rows, j0, cols, z.data(), words.data());
        for (int64_t r = 0; r < rows; ++r) {
          T* __restrict sr = s.data() + r * kKeyTile;
          T mx = kNegInf<T>;
#pragma omp simd reduction(max : mx)
          for (int64_t c = 0; c < cols; ++c) mx = sr[c] > mx ? sr[c] : mx;
          const T m_new = std::max(row_max[r], mx);
          if (m_new == kNegInf<T>) {  // every key so far hidden: this tile adds nothing
            std::fill(sr, sr + cols, T(0));
            continue;
          }
          for (int64_t c = 0; c < cols; ++c) sr[c] = vec_math::exp_t<T>(sr[c] - m_new);
          double sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(sr[c]);
          const T alpha = vec_math::exp_t<T>(row_max[r] - m_new);
          row_sum[r] = row_sum[r] * static_cast<double>(alpha) + sum;
          if (alpha != T(1))
            for (int64_t c = 0; c < pr.Ev; ++c) acc[r * ld + c] *= alpha;
          row_max[r] = m_new;
          if (pr.p > 0) {
            const T* zr = z.data() + r * kKeyTile;
            for (int64_t c = 0; c < cols; ++c) sr[c] *= zr[c];
          }
        }
        tile_gemm<T>(false, false, rows, pr.Ev, cols, T(1), s.data(), kKeyTile,
                     op.v.at(n) + j0 * op.v.ld, op.v.ld, T(1), acc, ld);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* o = acc + r * ld;
        if (row_sum[r] > 0) {
          const T inv = static_cast<T>(1.0 / row_sum[r]);
          for (int64_t c = 0; c < pr.Ev; ++c) o[c] *= inv;
          lse[n * pr.L + i0 + r] = row_max[r] + static_cast<T>(std::log(row_sum[r]));
        } else {
          std::fill(o, o + pr.Ev, T(0));
          lse[n * pr.L + i0 + r] = kNegInf<T>;
        }
      }
    }
  });
}

// Gradients of one call, (N, L, E), (N, S, E), (N, S, Ev) through their strides; each head's
// are zeroed here, just before they are summed into.
template <class T>
void backward_kernel(const Operands<T>& op, const Problem& pr, const Matrices<const T*>& out,
                     const T* lse, const Matrices<const T*>& dout, const Matrices<T*>& dq,
                     const Matrices<T*>& dk, const Matrices<T*>& dv) {
  const int64_t cost = pr.L * pr.S * (2 * pr.E + 2 * pr.Ev + 16);
  parallel_for(pr.N, cost, [&](int64_t b, int64_t e) {
    constexpr int64_t kTile = kQueryTile * kKeyTile;
    std::vector<T> p(kTile), dp(kTile), z(pr.p > 0 ? kTile : 0), pz(pr.p > 0 ? kTile : 0);
    std::vector<T> delta(static_cast<size_t>(pr.L));
    std::vector<uint32_t> words(pr.p > 0 ? kTile + 8 : 0);
    for (int64_t n = b; n < e; ++n) {
      const T* q = op.q.at(n);
      const T* k = op.k.at(n);
      const T* v = op.v.at(n);
      const T* o = out.at(n);
      const T* g = dout.at(n);
      const T* lse_n = lse + n * pr.L;
      T* dq_n = dq.at(n);
      T* dk_n = dk.at(n);
      T* dv_n = dv.at(n);
      for (int64_t i = 0; i < pr.L; ++i) std::fill(dq_n + i * dq.ld, dq_n + i * dq.ld + pr.E, T(0));
      for (int64_t j = 0; j < pr.S; ++j) {
        std::fill(dk_n + j * dk.ld, dk_n + j * dk.ld + pr.E, T(0));
        std::fill(dv_n + j * dv.ld, dv_n + j * dv.ld + pr.Ev, T(0));
      }
      for (int64_t i = 0; i < pr.L; ++i) {
        const T* gi = g + i * dout.ld;
        const T* oi = o + i * out.ld;
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t c = 0; c < pr.Ev; ++c) acc += static_cast<double>(gi[c] * oi[c]);
        delta[static_cast<size_t>(i)] = static_cast<T>(acc);
      }
      const T scale = static_cast<T>(pr.scale);
      for (int64_t j0 = 0; j0 < pr.S; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, pr.S - j0);
        // Causal: queries before j0 see none of these keys.
        for (int64_t i0 = pr.causal ? j0 / kQueryTile * kQueryTile : 0; i0 < pr.L;
             i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, pr.L - i0);
          score_tile(op, pr, n, i0, rows, j0, cols, p.data());
          if (pr.p > 0) dropout_tile(pr, n, i0, rows, j0, cols, z.data(), words.data());
          for (int64_t r = 0; r < rows; ++r) {
            T* __restrict pr_row = p.data() + r * kKeyTile;
            const T m = lse_n[i0 + r];
            if (m == kNegInf<T>) {
              std::fill(pr_row, pr_row + cols, T(0));
            } else {
              for (int64_t c = 0; c < cols; ++c) pr_row[c] = vec_math::exp_t<T>(pr_row[c] - m);
            }
            if (pr.p > 0) {
              const T* zr = z.data() + r * kKeyTile;
              for (int64_t c = 0; c < cols; ++c) pz[r * kKeyTile + c] = pr_row[c] * zr[c];
            }
          }
          const T* weights = pr.p > 0 ? pz.data() : p.data();  // what multiplied V
          tile_gemm<T>(true, false, cols, pr.Ev, rows, T(1), weights, kKeyTile, g + i0 * dout.ld,
                       dout.ld, T(1), dv_n + j0 * dv.ld, dv.ld);
          tile_gemm<T>(false, true, rows, cols, pr.Ev, T(1), g + i0 * dout.ld, dout.ld,
                       v + j0 * op.v.ld, op.v.ld, T(0), dp.data(), kKeyTile);
          for (int64_t r = 0; r < rows; ++r) {
            const T* __restrict pr_row = p.data() + r * kKeyTile;
            T* __restrict ds = dp.data() + r * kKeyTile;
            const T d = delta[static_cast<size_t>(i0 + r)];
            if (pr.p > 0) {
              const T* zr = z.data() + r * kKeyTile;
              for (int64_t c = 0; c < cols; ++c) ds[c] = pr_row[c] * (ds[c] * zr[c] - d);
            } else {
              for (int64_t c = 0; c < cols; ++c) ds[c] = pr_row[c] * (ds[c] - d);
            }
          }
          tile_gemm<T>(false, false, rows, pr.E, cols, scale, dp.data(), kKeyTile, k + j0 * op.k.ld,
                       op.k.ld, T(1), dq_n + i0 * dq.ld, dq.ld);
          tile_gemm<T>(true, false, cols, pr.E, rows, scale, dp.data(), kKeyTile, q + i0 * op.q.ld,
                       op.q.ld, T(1), dk_n + j0 * dk.ld, dk.ld);
        }
      }
    }
  });
}

// The weights softmax(scale q k^T + mask) with the causal limit, materialised (..., L, S).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, bool causal,
                         double scale) {
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(mul(q, scale), k.mT());
  Tensor m = mask;
  if (causal) {
    Tensor keep = le(arange(S).view({1, S}), arange(L).view({L, 1}));  // key s <= query l
    if (!m.defined()) {
      m = keep;
    } else if (m.dtype() == kBool) {
      m = logical_and(m, keep);
    } else {
      m = add(m, masked_fill(zeros({L, S}, m.dtype()), logical_not(keep),
                             -std::numeric_limits<double>::infinity()));
    }
  }
  if (!m.defined()) return softmax(scores, -1);
  return masked_softmax(scores, m, m.dtype() == kBool ? MaskKind::Bool : MaskKind::Additive);
}

// The dropout multipliers Z (keep / (1 - p), or 0) of the (..., L, S) weights for counters from
// `first`, as a constant tensor.
Tensor dropout_multipliers(const Shape& shape, DType dt, const Problem& pr) {
  Generator gen(pr.seed);
  gen.set_state(pr.seed, pr.first);
  return dropout(ones(shape, dt), pr.p, true, gen);
}

// SdpaBackward: the fused backward kernel; under create_graph, the same formulas written with
// ops (differentiable, but O(L * S) memory).
struct SdpaBackward final : Node {
  SavedTensor q{this}, k{this}, v{this}, out{this}, lse{this}, mask{this};
  Problem pr;
  explicit SdpaBackward(const Problem& p) : pr(p) {}

  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor qt = q.get(), kt = k.get(), vt = v.get(), m = mask.defined() ? mask.get() : Tensor();
    if (GradMode::enabled()) return composite_backward(qt, kt, vt, m, grad);
    Tensor o = out.get(), l = lse.get(), g = gemm_ready(grad);
    Tensor qr = gemm_ready(qt.detach()), kr = gemm_ready(kt.detach()), vr = gemm_ready(vt.detach());
    Tensor dq = empty_in_layout_of(qr, qr.shape()), dk = empty_in_layout_of(kr, kr.shape());
    Tensor dv = empty_in_layout_of(vr, vr.shape());
    dispatch_float(qt.dtype(), kOp, [&](auto tag) {
      using T = decltype(tag);
      backward_kernel<T>(operands<T>(qr, kr, vr, m, pr), pr, readable<T>(o, pr.N), l.data_ptr<T>(),
                         readable<T>(g, pr.N), writable<T>(dq, pr.N), writable<T>(dk, pr.N),
                         writable<T>(dv, pr.N));
    });
    return {dq, dk, dv};
  }

  std::vector<Tensor> composite_backward(const Tensor& qt, const Tensor& kt, const Tensor& vt,
                                         const Tensor& m, const Tensor& grad) const {
    Tensor p = attention_weights(qt, kt, m, pr.causal, pr.scale);
    Tensor z = pr.p > 0 ? dropout_multipliers(p.shape(), p.dtype(), pr) : Tensor();
    Tensor dv = matmul((z.defined() ? mul(p, z) : p).mT(), grad);
    Tensor dp = matmul(grad, vt.mT());
    if (z.defined()) dp = mul(dp, z);
    Tensor ds = mul(p, sub(dp, sum(mul(dp, p), {-1}, true)));
    return {mul(matmul(ds, kt), pr.scale), mul(matmul(ds.mT(), qt), pr.scale), dv};
  }
  const char* name() const override { return "ScaledDotProductAttentionBackward"; }
};

// Validates the call and fills everything but the dropout counters.
Problem check_problem(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DTypeError(
        fmt::format("{}: q, k and v must share one floating dtype, got {} {}, {} {}, {} {}", kOp,
                    dtype_name(q.dtype()), shape_str(q.shape()), dtype_name(k.dtype()),
                    shape_str(k.shape()), dtype_name(v.dtype()), shape_str(v.shape())));
  const int64_t nd = q.dim();
  bool ok = nd >= 2 && k.dim() == nd && v.dim() == nd && q.size(-1) == k.size(-1) &&
            k.size(-2) == v.size(-2);
  for (int64_t d = 0; ok && d < nd - 2; ++d) ok = k.size(d) == q.size(d) && v.size(d) == q.size(d);
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: expected q (..., L, E), k (..., S, E), v (..., S, Ev) with the same leading dims, "
        "got {}, {}, {}",
        kOp, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape())));
  if (!(o.dropout_p >= 0 && o.dropout_p <= 1))
    throw ValueError(fmt::format("{}: dropout_p must be in [0, 1], got {}", kOp, o.dropout_p));
  Problem pr;
  for (int64_t d = 0; d < nd - 2; ++d) pr.N *= q.size(d);
  pr.L = q.size(-2), pr.S = k.size(-2), pr.E = q.size(-1), pr.Ev = v.size(-1);
  pr.scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(pr.E, 1)));
  pr.p = o.dropout_p;
  pr.causal = o.is_causal;
  const Tensor& m = o.attn_mask;
  if (m.defined()) {
    if (m.dtype() != kBool && m.dtype() != q.dtype())
      throw DTypeError(fmt::format("{}: attn_mask must be bool or {} like q, got {} {}", kOp,
                                   dtype_name(q.dtype()), dtype_name(m.dtype()),
                                   shape_str(m.shape())));
    bool broadcasts = m.dim() <= nd;
    for (int64_t i = 1; broadcasts && i <= m.dim(); ++i) {
      const int64_t want = i == 1 ? pr.S : (i == 2 ? pr.L : q.size(-i));
      broadcasts = m.size(-i) == 1 || m.size(-i) == want;
    }
    if (!broadcasts)
      throw ShapeError(fmt::format("{}: attn_mask {} does not broadcast to the weights {}", kOp,
                                   shape_str(m.shape()), shape_str([&] {
                                     Shape s(q.shape().begin(), q.shape().end() - 2);
                                     s.push_back(pr.L);
                                     s.push_back(pr.S);
                                     return s;
                                   }())));
  }
  return pr;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const SdpaOptions& o) {
  Problem pr = check_problem(q_in, k_in, v_in, o);
  const Tensor& mask = o.attn_mask;
  if (mask.defined() && mask.requires_grad() && GradMode::enabled())
    return scaled_dot_product_attention_composite(q_in, k_in, v_in, o);
  Generator& gen = o.generator ? *o.generator : default_generator();
  if (pr.p > 0) {
    pr.seed = gen.seed();
    pr.first = gen.advance(static_cast<uint64_t>((pr.N * pr.L * pr.S + 3) / 4));
  }
  Tensor q = gemm_ready(q_in.detach()), k = gemm_ready(k_in.detach());
  Tensor v = gemm_ready(v_in.detach());
  Shape out_shape(q.shape().begin(), q.shape().end() - 1);
  out_shape.push_back(pr.Ev);
  Tensor out = empty_in_layout_of(q, out_shape), lse = empty({pr.N, pr.L}, q.dtype());
  dispatch_float(q.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T>(operands<T>(q, k, v, mask, pr), pr, writable<T>(out, pr.N),
                      lse.data_ptr<T>());
  });
  if (auto node = make_node<SdpaBackward>({&q_in, &k_in, &v_in}, pr)) {
    // The inputs are saved as given (not the detached copies) so that create_graph reaches them.
    node->q.save(q_in);
    node->k.save(k_in);
    node->v.save(v_in);
    node->out.save(out, /*is_output=*/true);
    node->lse.save(lse);
    if (mask.defined()) node->mask.save(mask);
    set_history(out, node);
  }
  return out;
}

Tensor scaled_dot_product_attention_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const SdpaOptions& o) {
  const Problem pr = check_problem(q, k, v, o);
  Tensor weights = attention_weights(q, k, o.attn_mask, pr.causal, pr.scale);
  Generator& gen = o.generator ? *o.generator : default_generator();
  return matmul(pr.p > 0 ? dropout(weights, pr.p, true, gen) : weights, v);
}

}  // namespace nabla
