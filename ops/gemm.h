// The one place nabla calls BLAS: row-major GEMM, C = alpha * op(A) op(B) + beta * C, split across
// threads by nabla (ops/gemm.cpp says why); and BlasView, the one test of whether BLAS can read a
// strided matrix in place.
#pragma once
#include <algorithm>
#include <cstdint>

#include "nabla/core/tensor.h"

namespace nabla::blas {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// C = bias (n values, repeated on every row) + op(A) op(B). Each thread writes the bias into its
// own block of C just before its GEMM adds into it, while those rows are in its cache.
template <class T>
void gemm_onto_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                    int64_t lda, const T* b, int64_t ldb, const T* bias, T* c, int64_t ldc);

// How BLAS can read a (rows x cols) matrix stored with strides (row_stride, col_stride): row-major
// (unit stride along a row, rows that do not overlap) or transposed (unit stride down a column),
// with leading dimension ld. A dim of size 0 or 1 has no meaningful stride and counts as dense.
struct BlasView {
  bool row_major = false, transposed = false;
  int64_t ld = 0;
  bool readable() const { return row_major || transposed; }

  static BlasView of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    if (cols <= 1) col_stride = 1;
    if (rows <= 1) row_stride = std::max<int64_t>(cols, 1);
    if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1))
      return {true, false, row_stride};
    if (row_stride == 1 && col_stride >= std::max<int64_t>(rows, 1))
      return {false, true, col_stride};
    return {};
  }
  // The last two dims of t.
  static BlasView of(const Tensor& t) {
    return of(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1));
  }
};

// t if BLAS can read its last two dims in place (row-major only, unless `transposed_ok`), else a
// contiguous copy. Detached either way: the kernels that call this record nothing.
inline Tensor as_readable(const Tensor& t, bool transposed_ok) {
  const BlasView view = BlasView::of(t);
  return view.row_major || (transposed_ok && view.transposed) ? t.detach()
                                                              : t.detach().contiguous();
}

}  // namespace nabla::blas
