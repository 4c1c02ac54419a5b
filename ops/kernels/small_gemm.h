// Small products without BLAS: short attention heads (a few dozen tokens, head dims up to 64) and,
// where the machine profile says so, any product up to 64 x 64 x 64 (ops/gemm.cpp). On an AVX2
// machine OpenBLAS 0.3.21 has no small-matrix kernels (its SKYLAKEX/COOPERLAKE targets do) and
// packs both operands on every call: the (64, 32) x (32, 64)^T score product of encoder_small ran
// at 40 GFLOP/s inside the attention kernel (AMD EPYC Zen 4, AVX2 build; docs/perf.md, "Small
// products and vector math on AVX2"). One register tile of kRows rows x two vectors of
// accumulators per block of C, the vectors as wide as the build's widest registers, with
// compile-time trip counts the compiler unrolls (the BLIS micro-kernel shape: Van Zee and van de
// Geijn, "BLIS", ACM TOMS 2015).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace nabla::kernels::small_gemm {

// The widest vector the build's target has. A wider GCC vector than the target's registers is
// lowered piece by piece through memory: 64-byte vectors ran at 6 GFLOP/s in an AVX2 build (AMD
// EPYC Zen 4, -march=znver3).
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
// Aligned only to T: loads and stores go through pointers to it at any element offset. (Through
// __builtin_memcpy instead, GCC's -march=znver3 build copied each vector via the stack in 16-byte
// pieces and reloaded it whole, a store-forwarding stall per load.)
template <class T>
struct Vec {
  typedef T type __attribute__((vector_size(kVectorBytes), aligned(sizeof(T))));
};
template <class T>
constexpr int64_t kLanes = kVectorBytes / static_cast<int64_t>(sizeof(T));

// 6 rows x 2 vectors: 12 accumulators, two B vectors and a broadcast fit AVX2's 16 registers
// (and leave AVX-512's 32 room). The last rows of C, if fewer, get a tile of their own height.
constexpr int64_t kRows = 6;

// Row-major op(A) row pointers and steps: op(A)(i, p) = a[i * row_step + p * depth_step].
template <class T>
struct ARows {
  const T* a;
  int64_t row_step, depth_step;
};

// op(B) = B^T (B is n x k) into the panel's rows p (k of them, np floats apart): 8 x 8 blocks
// transposed in registers (unpack, shuffle, swap halves: the usual AVX sequence), the edges one
// element at a time. Element by element, a (64, 32) x (32, 64)^T product took 3.66 us instead of
// 3.06 (AMD EPYC Zen 4, AVX2 build, two threads).
template <class T>
void transpose_into_panel(const T* b, int64_t ldb, int64_t n, int64_t k, T* dst, int64_t np) {
  int64_t j_done = 0, p_done = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    typedef float F8 __attribute__((vector_size(32), aligned(4)));
    typedef int I8 __attribute__((vector_size(32)));
    constexpr I8 kLo = {0, 8, 1, 9, 4, 12, 5, 13}, kHi = {2, 10, 3, 11, 6, 14, 7, 15};
    constexpr I8 kPairLo = {0, 1, 8, 9, 4, 5, 12, 13}, kPairHi = {2, 3, 10, 11, 6, 7, 14, 15};
    constexpr I8 kHalfLo = {0, 1, 2, 3, 8, 9, 10, 11}, kHalfHi = {4, 5, 6, 7, 12, 13, 14, 15};
    j_done = n / 8 * 8;
    p_done = k / 8 * 8;
    for (int64_t j0 = 0; j0 < j_done; j0 += 8)
      for (int64_t p0 = 0; p0 < p_done; p0 += 8) {
        F8 r[8], t[8], u[8];
        for (int i = 0; i < 8; ++i) r[i] = *reinterpret_cast<const F8*>(b + (j0 + i) * ldb + p0);
        for (int i = 0; i < 8; i += 2) {  // t: pairs of rows interleaved
          t[i] = __builtin_shuffle(r[i], r[i + 1], kLo);
          t[i + 1] = __builtin_shuffle(r[i], r[i + 1], kHi);
        }
        for (int i = 0; i < 8; i += 4) {  // u: four rows' elements side by side in each half
          u[i] = __builtin_shuffle(t[i], t[i + 2], kPairLo);
          u[i + 1] = __builtin_shuffle(t[i], t[i + 2], kPairHi);
          u[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], kPairLo);
          u[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], kPairHi);
        }
        for (int c = 0; c < 4; ++c) {  // columns c and c + 4 of the block
          *reinterpret_cast<F8*>(dst + (p0 + c) * np + j0) =
              __builtin_shuffle(u[c], u[c + 4], kHalfLo);
          *reinterpret_cast<F8*>(dst + (p0 + c + 4) * np + j0) =
              __builtin_shuffle(u[c], u[c + 4], kHalfHi);
        }
      }
  }
#endif
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = j < j_done ? p_done : 0; p < k; ++p) dst[p * np + j] = b[j * ldb + p];
}

// C rows [i0, i0 + kTileRows) x columns [j0, j0 + kVecs * lanes) of alpha op(A) op(B) + beta C,
// where op(B)'s row p starts at b + p * ldb and holds whole vectors (padded by the caller); `cols`
// of them are stored.
template <class T, int kVecs, int kTileRows>
[[gnu::always_inline]] inline void tile(const ARows<T>& op_a, int64_t i0, const T* b, int64_t ldb,
                                        int64_t k, int64_t j0, int64_t cols, T alpha, T beta, T* c,
                                        int64_t ldc) {
  using V = typename Vec<T>::type;
  constexpr int64_t L = kLanes<T>;
  const T* ar[kTileRows];
  for (int64_t r = 0; r < kTileRows; ++r) ar[r] = op_a.a + (i0 + r) * op_a.row_step;
  V acc[kTileRows][kVecs] = {};
  const T* bp = b + j0;
  for (int64_t p = 0; p < k; ++p, bp += ldb) {
    V bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = *reinterpret_cast<const V*>(bp + v * L);
    const int64_t off = p * op_a.depth_step;
    for (int64_t r = 0; r < kTileRows; ++r) {
      const T x = ar[r][off];
      for (int v = 0; v < kVecs; ++v) acc[r][v] += x * bv[v];
    }
  }
  for (int64_t r = 0; r < kTileRows; ++r) {
    T* cr = c + (i0 + r) * ldc + j0;
    for (int v = 0; v < kVecs; ++v) {
      const int64_t left = cols - v * L;
      if (left <= 0) break;
      V* cv = reinterpret_cast<V*>(cr + v * L);
      if (left >= L) {  // a whole vector
        *cv = beta != T(0) ? alpha * acc[r][v] + beta * *cv : alpha * acc[r][v];
        continue;
      }
      for (int64_t j = 0; j < left; ++j) {
        T* cj = cr + v * L + j;
        *cj = beta == T(0) ? alpha * acc[r][v][j] : alpha * acc[r][v][j] + beta * *cj;
      }
    }
  }
}

// Rows [i0, i0 + kTileRows) of C, every column: tiles of two vectors, then one if a vector is left.
template <class T, int kTileRows>
void row_of_tiles(const ARows<T>& op_a, int64_t i0, const T* pb, int64_t ldp, int64_t n, int64_t np,
                  int64_t k, T alpha, T beta, T* c, int64_t ldc) {
  constexpr int64_t L = kLanes<T>;
  int64_t j0 = 0;
  for (; j0 + L < np; j0 += 2 * L)
    tile<T, 2, kTileRows>(op_a, i0, pb, ldp, k, j0, std::min(2 * L, n - j0), alpha, beta, c, ldc);
  if (j0 < np) tile<T, 1, kTileRows>(op_a, i0, pb, ldp, k, j0, n - j0, alpha, beta, c, ldc);
}

// C (m x n, row stride ldc) = alpha op(A) op(B) + beta C, BLAS's row-major gemm: op(A) is m x k
// (A^T when ta), op(B) k x n (B^T when tb). beta == 0 ignores C's old values (BLAS's rule).
// op(B) is read in place when its rows are contiguous whole vectors, else copied into a
// zero-padded panel; op(A) is read in place, one broadcast per row and step.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  constexpr int64_t L = kLanes<T>;
  if (m == 0 || n == 0) return;
  const int64_t np = (n + L - 1) / L * L;
  const T* pb = b;
  int64_t ldp = ldb;
  if (tb || np != n) {
    thread_local std::vector<T> panel;
    if (panel.size() < static_cast<size_t>(k * np)) panel.resize(static_cast<size_t>(k * np));
    T* dst = panel.data();
    if (tb) {  // B's rows read in order, op(B)'s columns written
      for (int64_t p = 0; p < k; ++p) std::fill(dst + p * np + n, dst + (p + 1) * np, T(0));
      transpose_into_panel(b, ldb, n, k, dst, np);
    } else {
      for (int64_t p = 0; p < k; ++p) {
        std::copy(b + p * ldb, b + p * ldb + n, dst + p * np);
        std::fill(dst + p * np + n, dst + (p + 1) * np, T(0));
      }
    }
    pb = dst;
    ldp = np;
  }
  const ARows<T> op_a{a, ta ? 1 : lda, ta ? lda : 1};
  // The last rows, if fewer than kRows, get a tile of their own height.
  using RowOfTiles = void (*)(const ARows<T>&, int64_t, const T*, int64_t, int64_t, int64_t,
                              int64_t, T, T, T*, int64_t);
  static constexpr RowOfTiles kByHeight[kRows] = {row_of_tiles<T, 1>, row_of_tiles<T, 2>,
                                                  row_of_tiles<T, 3>, row_of_tiles<T, 4>,
                                                  row_of_tiles<T, 5>, row_of_tiles<T, 6>};
  for (int64_t i0 = 0; i0 < m; i0 += kRows)
    kByHeight[std::min(kRows, m - i0) - 1](op_a, i0, pb, ldp, n, np, k, alpha, beta, c, ldc);
}

}  // namespace nabla::kernels::small_gemm
