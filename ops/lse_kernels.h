// Row log-sum-exp for the fused cross_entropy, many rows at a time. A row is one position's C
// logits, with stride `inner` in an (outer, C, inner) layout. The row's sum of exp(z - max) is
// accumulated in double in class order (the documented semantics): one row alone is a chain of
// dependent adds that runs at the add's latency, so these kernels run kLanes rows side by side,
// one per SIMD lane, each still summed in class order. Every row's result is therefore bitwise
// that of a plain loop over the row. No autograd here.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/parallel.h"
#include "ops/vec_math.h"

namespace nabla::kernels {

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
    T mj = -std::numeric_limits<T>::infinity();
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
  for (int j = 0; j < kLseLanes; ++j) m[j] = -std::numeric_limits<T>::infinity();
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

// Calls f(p, lse, zsum) once for every position p of z, laid out (outer, C, inner), in parallel
// (f must be safe to call from several threads for different p, and must not throw). zsum is 0
// unless WithZsum.
template <class T, bool WithZsum, class F>
void for_each_row_lse(const T* z, int64_t outer, int64_t C, int64_t inner, F&& f) {
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
        const int64_t p = p0 + std::min(j, n - 1);
        rows[j] = z + (p / inner) * C * inner + p % inner;
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

}  // namespace nabla::kernels
