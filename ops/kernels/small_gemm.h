// The products of short attention heads (a few dozen tokens, head dim <= 32) without BLAS: at
// vit_small's (50, 16) x (16, 50) OpenBLAS's per-call packing and dispatch ran the product at
// 31 GFLOP/s (docs/perf.md, "Small attention heads"). One register tile of kRows x kCols<T>
// accumulators per block of C, with compile-time trip counts the compiler unrolls and vectorises
// under -march=native (the BLIS micro-kernel shape: Van Zee and van de Geijn, "BLIS", ACM TOMS
// 2015).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace nabla::kernels::small_gemm {

// 6 rows x 64 bytes: 6 zmm or 12 ymm accumulators plus the B row and a broadcast fit the 16
// registers of AVX2 as well as AVX-512's 32. GCC's vector extension (64 bytes, split into the
// widest registers the target has) keeps them in registers; plain loops over a T[6][16] array
// did not (23-46 GFLOP/s on the Zen 4, below OpenBLAS).
template <class T>
struct Vec;
template <>
struct Vec<float> {
  typedef float type __attribute__((vector_size(64), aligned(4)));
};
template <>
struct Vec<double> {
  typedef double type __attribute__((vector_size(64), aligned(8)));
};
constexpr int64_t kRows = 6;
template <class T>
constexpr int64_t kCols = 64 / static_cast<int64_t>(sizeof(T));

// C (m x n, row stride ldc) = alpha op(A) op(B) + beta C, BLAS's row-major gemm: op(A) is m x k
// (A^T when ta), op(B) k x n (B^T when tb). beta == 0 ignores C's old values (BLAS's rule).
// op(B) is copied into a zero-padded panel (k x n rounded up to kCols) so that its rows load as
// whole vectors; op(A) is read in place, one broadcast per row and step.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  using V = typename Vec<T>::type;
  if (m == 0 || n == 0) return;
  const int64_t np = (n + kCols<T> - 1) / kCols<T> * kCols<T>;
  thread_local std::vector<T> panel;
  if (panel.size() < static_cast<size_t>(k * np)) panel.resize(static_cast<size_t>(k * np));
  T* pb = panel.data();
  for (int64_t p = 0; p < k; ++p) {
    T* row = pb + p * np;
    if (!tb) std::copy(b + p * ldb, b + p * ldb + n, row);
    std::fill(row + n, row + np, T(0));
  }
  if (tb)  // B's rows read in order, op(B)'s columns written
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) pb[p * np + j] = b[j * ldb + p];
  // op(A)(i, p) = a[i * row_step + p * depth_step].
  const int64_t row_step = ta ? 1 : lda, depth_step = ta ? lda : 1;
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    const int64_t rows = std::min(kRows, m - i0);
    const T* ar[kRows];  // rows past m repeat the last one; their results are dropped
    for (int64_t r = 0; r < kRows; ++r) ar[r] = a + std::min(i0 + r, m - 1) * row_step;
    for (int64_t j0 = 0; j0 < np; j0 += kCols<T>) {
      V acc[kRows] = {};
      for (int64_t p = 0; p < k; ++p) {
        V bv;
        __builtin_memcpy(&bv, pb + p * np + j0, sizeof(V));
        const int64_t off = p * depth_step;
        for (int64_t r = 0; r < kRows; ++r) acc[r] += ar[r][off] * bv;
      }
      const int64_t cols = std::min(kCols<T>, n - j0);
      for (int64_t r = 0; r < rows; ++r) {
        T* cr = c + (i0 + r) * ldc + j0;
        if (cols == kCols<T>) {  // whole vectors
          V old = {};
          if (beta != T(0)) __builtin_memcpy(&old, cr, sizeof(V));
          const V result = alpha * acc[r] + beta * old;
          __builtin_memcpy(cr, &result, sizeof(V));
          continue;
        }
        T out[kCols<T>];
        __builtin_memcpy(out, &acc[r], sizeof(V));
        for (int64_t j = 0; j < cols; ++j)
          cr[j] = beta == T(0) ? alpha * out[j] : alpha * out[j] + beta * cr[j];
      }
    }
  }
}

}  // namespace nabla::kernels::small_gemm
