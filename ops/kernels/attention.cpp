#include "nabla/ops/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nabla/core/generator.h"
#include "nabla/core/machine.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/gemm.h"
#include "nabla/ops/kernels/small_gemm.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/vec_math.h"

namespace nabla::kernels {

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

bool uses_small_kernel(const SdpaProblem& pr) {
  const machine::Profile& m = machine::profile();
  return pr.L <= m.attention_small_max_tokens && pr.S <= m.attention_small_max_tokens &&
         pr.E <= m.attention_small_max_head_dim && pr.Ev <= m.attention_small_max_head_dim;
}

namespace {

// Tiles of kQueryTile queries x key_tile keys; key_tile comes from the machine profile (sized so
// that a backward step's tiles stay in L2, core/machine.cpp).
constexpr int64_t kQueryTile = 64;
int64_t key_tile() { return machine::profile().attention_key_tile; }

// The row stride of the score-sized buffers: the keys a tile holds, rounded up to 16. A stride of
// the whole key tile (256 floats, 1 KiB) for vit_small's 50 keys put a tile's 50 rows on a quarter
// of the L1's sets (64 sets of 64 bytes, 8 ways), more lines than ways.
int64_t score_stride(int64_t S, int64_t kt) { return (std::min(S, kt) + 15) / 16 * 16; }

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
  return {t.data_ptr<T>(), slice_offsets(t, N), blas::BlasView::of(t).ld};
}
template <class T>
Matrices<T*> writable(const Tensor& t, int64_t N) {
  return {t.data_ptr<T>(), slice_offsets(t, N), blas::BlasView::of(t).ld};
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

// C (m x n) = alpha op(A) op(B) + beta C, also for empty dims (BLAS rejects leading dims of 0);
// short heads' products (`small`, see uses_small_kernel) without BLAS.
template <class T>
void tile_gemm(bool small, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (small) {
    small_gemm::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
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
  bool small = false;  // products on small_gemm instead of BLAS
};

template <class T>
Operands<T> operands(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const SdpaProblem& pr) {
  Shape full(q.shape().begin(), q.shape().end() - 2);
  full.push_back(pr.L);
  full.push_back(pr.S);
  return {readable<T>(q, pr.N), readable<T>(k, pr.N), readable<T>(v, pr.N),
          mask_view(mask, full, pr.N), uses_small_kernel(pr)};
}

// Scores of rows [i0, i0 + rows) and keys [j0, j0 + cols) of head n into s (row stride ld):
// scale q k^T, plus the mask, with hidden keys at -inf.
template <class T>
void score_tile(const Operands<T>& op, const SdpaProblem& pr, int64_t n, int64_t i0, int64_t rows,
                int64_t j0, int64_t cols, T* s, int64_t ld) {
  const auto nn = static_cast<size_t>(n);
  tile_gemm<T>(op.small, false, true, rows, cols, pr.E, static_cast<T>(pr.scale),
               op.q.at(n) + i0 * op.q.ld, op.q.ld, op.k.at(n) + j0 * op.k.ld, op.k.ld, T(0), s, ld);
  const MaskView& m = op.mask;
  for (int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * ld;
    const int64_t i = i0 + r;
    if (m.kind != MaskView::Kind::None) {
      const int64_t base = m.offsets[nn] + i * m.stride_l + j0 * m.stride_s;
      // Bools read as bytes and a select, with a unit-stride loop of its own: GCC 12 vectorises
      // neither a branch on a bool load nor a strided access (the branch was 15% of a padded
      // langid forward, AMD EPYC Zen 4).
      if (m.kind == MaskView::Kind::Keep) {
        const auto* mp = static_cast<const uint8_t*>(m.data) + base;
        if (m.stride_s == 1) {
          for (int64_t c = 0; c < cols; ++c) sr[c] = mp[c] ? sr[c] : kNegInf<T>;
        } else {
          for (int64_t c = 0; c < cols; ++c) sr[c] = mp[c * m.stride_s] ? sr[c] : kNegInf<T>;
        }
      } else {
        const T* mp = static_cast<const T*>(m.data) + base;
        if (m.stride_s == 1) {
          for (int64_t c = 0; c < cols; ++c) sr[c] += mp[c];
        } else {
          for (int64_t c = 0; c < cols; ++c) sr[c] += mp[c * m.stride_s];
        }
      }
    }
    if (pr.causal)
      for (int64_t c = std::max<int64_t>(0, i - j0 + 1); c < cols; ++c) sr[c] = kNegInf<T>;
  }
}

// z[r * ld + c] = 1 / (1 - p) if weight (n, i0 + r, j0 + c) is kept, else 0. Element e of the
// (N, L, S) weights uses word e % 4 of Philox block first + e / 4: the counters dropout() uses.
// A tile spanning every key is one run of counters, drawn in one call (Generator::blocks
// vectorises over long runs); `words` holds kQueryTile * ld + 8 words.
template <class T>
void dropout_tile(const SdpaProblem& pr, int64_t n, int64_t i0, int64_t rows, int64_t j0,
                  int64_t cols, T* z, int64_t ld, uint32_t* words) {
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
      T* zr = z + (r0 + r) * ld;
      for (int64_t c = 0; c < cols; ++c)
        zr[c] = static_cast<uint64_t>(w[c]) >= threshold ? keep_scale : T(0);
    }
  }
}

template <class T>
void forward_kernel(const Operands<T>& op, const SdpaProblem& pr, const Matrices<T*>& out, T* lse) {
  const int64_t tiles = (pr.L + kQueryTile - 1) / kQueryTile;
  const int64_t cost = kQueryTile * pr.S * (pr.E + pr.Ev + 8);
  const int64_t kt = key_tile(), sld = score_stride(pr.S, kt), tile = kQueryTile * sld;
  parallel_for(pr.N * tiles, cost, [&](int64_t b, int64_t e) {
    std::vector<T> s(tile), z(pr.p > 0 ? tile : 0);
    std::vector<uint32_t> words(pr.p > 0 ? tile + 8 : 0);
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
      for (int64_t j0 = 0; j0 < key_end; j0 += kt) {
        const int64_t cols = std::min(kt, key_end - j0);
        score_tile(op, pr, n, i0, rows, j0, cols, s.data(), sld);
        if (pr.p > 0) dropout_tile(pr, n, i0, rows, j0, cols, z.data(), sld, words.data());
        for (int64_t r = 0; r < rows; ++r) {
          T* __restrict sr = s.data() + r * sld;
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
            const T* zr = z.data() + r * sld;
            for (int64_t c = 0; c < cols; ++c) sr[c] *= zr[c];
          }
        }
        tile_gemm<T>(op.small, false, false, rows, pr.Ev, cols, T(1), s.data(), sld,
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
void backward_kernel(const Operands<T>& op, const SdpaProblem& pr, const Matrices<const T*>& out,
                     const T* lse, const Matrices<const T*>& dout, const Matrices<T*>& dq,
                     const Matrices<T*>& dk, const Matrices<T*>& dv) {
  const int64_t cost = pr.L * pr.S * (2 * pr.E + 2 * pr.Ev + 16);
  const int64_t kt = key_tile(), sld = score_stride(pr.S, kt), tile = kQueryTile * sld;
  parallel_for(pr.N, cost, [&](int64_t b, int64_t e) {
    std::vector<T> p(tile), dp(tile), z(pr.p > 0 ? tile : 0), pz(pr.p > 0 ? tile : 0);
    std::vector<T> delta(static_cast<size_t>(pr.L));
    std::vector<uint32_t> words(pr.p > 0 ? tile + 8 : 0);
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
      for (int64_t j0 = 0; j0 < pr.S; j0 += kt) {
        const int64_t cols = std::min(kt, pr.S - j0);
        // Causal: queries before j0 see none of these keys.
        for (int64_t i0 = pr.causal ? j0 / kQueryTile * kQueryTile : 0; i0 < pr.L;
             i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, pr.L - i0);
          score_tile(op, pr, n, i0, rows, j0, cols, p.data(), sld);
          if (pr.p > 0) dropout_tile(pr, n, i0, rows, j0, cols, z.data(), sld, words.data());
          for (int64_t r = 0; r < rows; ++r) {
            T* __restrict pr_row = p.data() + r * sld;
            const T m = lse_n[i0 + r];
            if (m == kNegInf<T>) {
              std::fill(pr_row, pr_row + cols, T(0));
            } else {
              for (int64_t c = 0; c < cols; ++c) pr_row[c] = vec_math::exp_t<T>(pr_row[c] - m);
            }
            if (pr.p > 0) {
              const T* zr = z.data() + r * sld;
              for (int64_t c = 0; c < cols; ++c) pz[r * sld + c] = pr_row[c] * zr[c];
            }
          }
          const T* weights = pr.p > 0 ? pz.data() : p.data();  // what multiplied V
          tile_gemm<T>(op.small, true, false, cols, pr.Ev, rows, T(1), weights, sld,
                       g + i0 * dout.ld, dout.ld, T(1), dv_n + j0 * dv.ld, dv.ld);
          tile_gemm<T>(op.small, false, true, rows, cols, pr.Ev, T(1), g + i0 * dout.ld, dout.ld,
                       v + j0 * op.v.ld, op.v.ld, T(0), dp.data(), sld);
          for (int64_t r = 0; r < rows; ++r) {
            const T* __restrict pr_row = p.data() + r * sld;
            T* __restrict ds = dp.data() + r * sld;
            const T d = delta[static_cast<size_t>(i0 + r)];
            if (pr.p > 0) {
              const T* zr = z.data() + r * sld;
              for (int64_t c = 0; c < cols; ++c) ds[c] = pr_row[c] * (ds[c] * zr[c] - d);
            } else {
              for (int64_t c = 0; c < cols; ++c) ds[c] = pr_row[c] * (ds[c] - d);
            }
          }
          tile_gemm<T>(op.small, false, false, rows, pr.E, cols, scale, dp.data(), sld,
                       k + j0 * op.k.ld, op.k.ld, T(1), dq_n + i0 * dq.ld, dq.ld);
          tile_gemm<T>(op.small, true, false, cols, pr.E, rows, scale, dp.data(), sld,
                       q + i0 * op.q.ld, op.q.ld, T(1), dk_n + j0 * dk.ld, dk.ld);
        }
      }
    }
  });
}

}  // namespace

void sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                  const SdpaProblem& pr, const Tensor& out, const Tensor& lse) {
  dispatch_float(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T>(operands<T>(q, k, v, mask, pr), pr, writable<T>(out, pr.N),
                      lse.data_ptr<T>());
  });
}

void sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                   const SdpaProblem& pr, const Tensor& out, const Tensor& lse, const Tensor& grad,
                   const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  dispatch_float(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T>(operands<T>(q, k, v, mask, pr), pr, readable<T>(out, pr.N),
                       lse.data_ptr<T>(), readable<T>(grad, pr.N), writable<T>(dq, pr.N),
                       writable<T>(dk, pr.N), writable<T>(dv, pr.N));
  });
}

}  // namespace nabla::kernels
