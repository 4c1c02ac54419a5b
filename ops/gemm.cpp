// The one place nabla calls BLAS (and, where the machine profile says so, small_gemm for small
// products). A product big enough to share is split by us into one block of rows (or columns) per
// thread, each a single-threaded OpenBLAS call, instead of being handed to OpenBLAS's own
// threading.
//
// NOTE: measured on the 2-core host, OpenBLAS 0.3.21 (SkylakeX kernels), one call threaded by
// OpenBLAS vs the split (time ratio split / OpenBLAS): the model shapes with K <= 1024 (2048 rows
// x 128 in x 128..512 out, 6400 x 64 x 128, ...) 0.51-0.86; weight gradients (M x 2048..6400 x N,
// A transposed) 0.66-0.85; the large encoder_large products 0.93-1.01; the worst case seen,
// 256 x 4096 x 1024, 1.02 when split along the larger of M and N (1.10 along M). OpenBLAS's
// threads synchronise inside the call and share its packed panels; with K this small the packing
// and the barriers are a large part of the work. As with OpenBLAS's own threading, the last bits
// of a result may depend on the thread count (the pieces can take other kernels). In
// deterministic mode (core/parallel.h) the split is into kDeterministicParts blocks whatever the
// thread count, and OpenBLAS never threads a call, so the result does not depend on it. The
// smallest product worth splitting and the alignment of the split points depend on the machine
// (core/machine.h). So does the library: where OpenBLAS runs narrower kernels than the CPU has,
// float32 blocks go to oneDNN's sgemm instead (machine.h: onednn_sgemm_min_flop), split the
// same way, one thread per block; float64 always stays on OpenBLAS (oneDNN has no dgemm).
#include "nabla/ops/gemm.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <climits>

#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/machine.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/kernels/small_gemm.h"

namespace nabla::blas {
namespace {

blasint to_blas(int64_t v) {
  if (v > INT_MAX)
    throw ValueError(fmt::format(
        "matrix product: a dimension of {} exceeds the BLAS integer range (2^31 - 1); split the "
        "operands into smaller blocks",
        v));
  return static_cast<blasint>(v);
}

// Which library runs a product's BLAS calls: OpenBLAS, or oneDNN's sgemm where the machine
// profile sends float32 products there (OpenBLAS on narrower kernels than the CPU's).
enum class Backend : uint8_t { OpenBLAS, OneDnn };

template <class T>
Backend backend_for(int64_t m, int64_t n, int64_t k) {
  if constexpr (std::is_same_v<T, float>) {
    const int64_t min_flop = machine::profile().onednn_sgemm_min_flop;
    // Empty products keep OpenBLAS's handling (C scaled by beta, no operand read).
    // Not a tuned kernel: NABLA_KERNELS=reference runs the same products, as with the split.
    if (min_flop >= 0 && m > 0 && n > 0 && k > 0 && 2 * m * n * k >= min_flop &&
        onednn::available())
      return Backend::OneDnn;
  }
  return Backend::OpenBLAS;
}

// Below this many FLOPs a call outside a split runs on one thread: OpenBLAS's own threshold
// (65536 x GEMM_MULTITHREAD_THRESHOLD multiply-adds, interface/gemm.c), where oneDNN would
// wake the second thread for a product of a few microseconds.
constexpr int64_t kThreadedCallMinFlop = int64_t{1} << 19;

template <class T>
void call_blas(Backend backend, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
               const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const auto trans_a = ta ? CblasTrans : CblasNoTrans, trans_b = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    if (backend == Backend::OneDnn) {
      const bool threaded = !in_parallel_part() && 2 * m * n * k >= kThreadedCallMinFlop;
      onednn::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threaded);
      return;
    }
    cblas_sgemm(CblasRowMajor, trans_a, trans_b, to_blas(m), to_blas(n), to_blas(k), alpha, a,
                to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, trans_a, trans_b, to_blas(m), to_blas(n), to_blas(k), alpha, a,
                to_blas(lda), b, to_blas(ldb), beta, c, to_blas(ldc));
  }
}

// [begin, end) of part t of `total` in `parts` nearly equal blocks, aligned to `align` (split
// points fall on multiples of the BLAS kernels' tile).
std::pair<int64_t, int64_t> block(int64_t total, int64_t parts, int64_t t, int64_t align) {
  auto bound = [&](int64_t i) {
    if (i >= parts) return total;
    return std::min(total, total * i / parts / align * align);
  };
  return {bound(t), bound(t + 1)};
}

// Runs piece(rows, p0, p1) for blocks of C: rows p0..p1 (rows = true) or columns p0..p1,
// split_parts() blocks (run by the active threads) when the product is worth splitting, else one
// block covering all rows.
// OpenBLAS's OpenMP build threads a call made outside a parallel region by its own count, and
// never raises that count again by itself once it is 1: keep it equal to the threads the load
// leaves free, or a product run serially under load would wake a second thread on a busy core.
// Deterministic mode keeps it at 1: OpenBLAS's own split follows its thread count.
void match_blas_threads() {
  if (omp_in_parallel()) return;  // inside a region OpenBLAS runs single-threaded anyway
  const int want = deterministic() ? 1 : active_threads();
  if (openblas_get_num_threads() != want || omp_get_max_threads() != want)
    openblas_set_num_threads(want);
}

template <class F>
void for_each_block(int64_t m, int64_t n, int64_t k, F&& piece) {
  match_blas_threads();
  // Below the profile's size one call beats waking the pool (core/machine.cpp says why).
  const machine::Profile& prof = machine::profile();
  const int64_t parts = split_parts(), align = prof.gemm_block_align;
  const bool split = parts > 1 && !in_parallel_part() &&
                     2 * m * n * k >= prof.gemm_min_split_flop &&
                     std::max(m, n) >= 2 * align * parts;
  if (!split) {  // inside a region OpenBLAS runs single-threaded
    piece(true, int64_t{0}, m);
    return;
  }
  const bool rows = m >= n;  // split the larger of M and N
  run_parts(parts, [&](int64_t part) {
    const auto [p0, p1] = block(rows ? m : n, parts, part, align);
    if (p0 < p1) piece(rows, p0, p1);
  });
}

// op(A) restricted to rows p0..p1 (rows) or all of it; op(B) to columns p0..p1 or all of it.
template <class T>
void gemm_block(Backend backend, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc,
                bool rows, int64_t p0, int64_t p1) {
  if (rows) {
    const T* a_part = ta ? a + p0 : a + p0 * lda;
    call_blas<T>(backend, ta, tb, p1 - p0, n, k, alpha, a_part, lda, b, ldb, beta, c + p0 * ldc,
                 ldc);
  } else {
    const T* b_part = tb ? b + p0 * ldb : b + p0;
    call_blas<T>(backend, ta, tb, m, p1 - p0, k, alpha, a, lda, b_part, ldb, beta, c + p0, ldc);
  }
}

// Whether the machine profile sends this product to small_gemm's register tiles: on AVX2
// OpenBLAS packs both operands on every call, which costs more than the work in small products
// (core/machine.cpp). k == 0 stays with the BLAS path's own handling.
bool small_product(int64_t m, int64_t n, int64_t k) {
  const int64_t max = machine::profile().small_gemm_max_macs;
  return max > 0 && k > 0 && m <= max && n <= max && m * n <= max && m * n * k <= max;
}

void check_sizes(std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes) (void)to_blas(v);  // here, so that nothing throws inside the region
}

}  // namespace

template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  check_sizes({m, n, k, lda, ldb, ldc});
  inspect::GemmScope scope(m, n, k, dtype_of<T>());
  if (small_product(m, n, k)) {
    kernels::small_gemm::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const Backend backend = backend_for<T>(m, n, k);
  for_each_block(m, n, k, [&](bool rows, int64_t p0, int64_t p1) {
    gemm_block<T>(backend, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, rows, p0, p1);
  });
}

template <class T>
void gemm_onto_bias(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                    const T* b, int64_t ldb, const T* bias, T* c, int64_t ldc) {
  check_sizes({m, n, k, lda, ldb, ldc});
  inspect::GemmScope scope(m, n, k, dtype_of<T>());
  if (small_product(m, n, k)) {
    for (int64_t r = 0; r < m; ++r) std::copy(bias, bias + n, c + r * ldc);
    kernels::small_gemm::gemm<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(1), c, ldc);
    return;
  }
  const Backend backend = backend_for<T>(m, n, k);
  for_each_block(m, n, k, [&](bool rows, int64_t p0, int64_t p1) {
    const int64_t r0 = rows ? p0 : 0, r1 = rows ? p1 : m, c0 = rows ? 0 : p0, c1 = rows ? n : p1;
    for (int64_t r = r0; r < r1; ++r) std::copy(bias + c0, bias + c1, c + r * ldc + c0);
    if (k > 0)
      gemm_block<T>(backend, ta, tb, m, n, k, T(1), a, lda, b, ldb, T(1), c, ldc, rows, p0, p1);
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm_onto_bias<float>(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                    const float*, int64_t, const float*, float*, int64_t);
template void gemm_onto_bias<double>(bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                                     const double*, int64_t, const double*, double*, int64_t);

}  // namespace nabla::blas
