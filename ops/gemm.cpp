#include "ops/gemm.h"

#include <cblas.h>

#include <climits>

#include "core/error.h"

namespace nabla::blas {
namespace {

blasint to_blas(int64_t v) {
  if (v > INT_MAX) throw ValueError("gemm: dimension exceeds the BLAS integer range");
  return static_cast<blasint>(v);
}

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n), to_blas(k), alpha, a,
              to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                  double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, to_blas(m), to_blas(n), to_blas(k), alpha, a,
              to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
}

}  // namespace nabla::blas
