// The one place nabla calls BLAS: row-major GEMM, C = alpha * op(A) op(B) + beta * C, split across
// threads by nabla (ops/gemm.cpp says why).
#pragma once
#include <cstdint>

namespace nabla::blas {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// C = bias (n values, repeated on every row) + op(A) op(B). Each thread writes the bias into its
// own block of C just before its GEMM adds into it, while those rows are in its cache.
template <class T>
void gemm_onto_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                    int64_t lda, const T* b, int64_t ldb, const T* bias, T* c, int64_t ldc);

}  // namespace nabla::blas
