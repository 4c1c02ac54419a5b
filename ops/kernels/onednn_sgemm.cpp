// oneDNN's sgemm for blas::gemm's float32 products (ops/kernels/onednn.h). oneDNN picks its
// kernels from the CPU's own features (avx512_core on an AMD EPYC Zen 5), where OpenBLAS may
// run its Haswell kernels: pinned there by OPENBLAS_CORETYPE, as that Zen 5's host does because
// older OpenBLAS kernels misbehave on some new CPUs. dnnl_sgemm takes row-major
// operands with cblas_sgemm's meaning
// (https://oneapi-src.github.io/oneDNN/v2.6/group_dnnl_api_blas.html), so no copy is made here.
#if NABLA_WITH_ONEDNN
#include <fmt/format.h>
#include <omp.h>

#include "nabla/core/error.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/kernels/onednn_backend.h"

namespace nabla::onednn {

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           bool threaded) {
  constexpr const char* what = "onednn::sgemm";
  backend::check_sizes(what, {m, n, k, lda, ldb, ldc});
  // oneDNN splits a call over omp_get_max_threads() outside a parallel region (one thread
  // inside): set it for this call and put it back, so nothing else sees a changed count.
  const bool outside = !omp_in_parallel();
  const int before = outside ? omp_get_max_threads() : 1;
  if (threaded) {
    backend::prepare_threads();
  } else if (outside && before != 1) {
    omp_set_num_threads(1);
  }
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (outside && omp_get_max_threads() != before) omp_set_num_threads(before);
  if (status != dnnl_success)
    throw Error(fmt::format("{}: oneDNN failed (status {}) on ({} x {}){} @ ({} x {}){}", what,
                            static_cast<int>(status), trans_a ? k : m, trans_a ? m : k,
                            trans_a ? "^T" : "", trans_b ? n : k, trans_b ? k : n,
                            trans_b ? "^T" : ""));
}

}  // namespace nabla::onednn
#endif
