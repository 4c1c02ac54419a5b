// blas::gemm splits a large product into one block of rows (or columns) per thread. Every
// transpose combination, sizes that do not divide evenly, strided leading dims, alpha and beta:
// the result must equal a float64 reference, on one thread and on two.
#include <cmath>
#include <vector>

#include "nabla/ops/gemm.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

struct Case {
  int64_t m, n, k;
};

// C = alpha op(A) op(B) + beta C with row-major storage and leading dims padded by 3.
void check_case(const Case& c, bool ta, bool tb, int threads) {
  const int64_t lda = (ta ? c.m : c.k) + 3, ldb = (tb ? c.k : c.n) + 3, ldc = c.n + 3;
  const int64_t a_rows = ta ? c.k : c.m, b_rows = tb ? c.n : c.k;
  Generator g(static_cast<uint64_t>(c.m * 7 + c.n * 3 + c.k));
  const std::vector<float> a = randn({a_rows * lda}, g).to_vector<float>();
  const std::vector<float> b = randn({b_rows * ldb}, g).to_vector<float>();
  std::vector<float> out = randn({c.m * ldc}, g).to_vector<float>();
  const std::vector<float> c0 = out;
  const float alpha = 0.75f, beta = -0.5f;
  const int prev = num_threads();
  set_num_threads(threads);
  blas::gemm<float>(ta, tb, c.m, c.n, c.k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(),
                    ldc);
  set_num_threads(prev);
  double worst = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = a[static_cast<size_t>(ta ? p * lda + i : i * lda + p)];
        const double bv = b[static_cast<size_t>(tb ? j * ldb + p : p * ldb + j)];
        acc += av * bv;
      }
      const double want = alpha * acc + beta * c0[static_cast<size_t>(i * ldc + j)];
      worst = std::max(
          worst, std::abs(out[static_cast<size_t>(i * ldc + j)] - want) / (1.0 + std::abs(want)));
    }
  for (int64_t i = 0; i < c.m; ++i)  // the padding between rows is untouched
    for (int64_t j = c.n; j < ldc; ++j)
      CHECK(out[static_cast<size_t>(i * ldc + j)] == c0[static_cast<size_t>(i * ldc + j)]);
  CHECK(worst < 1e-4);
}

}  // namespace

TEST_CASE("gemm split across threads equals a float64 reference", "[ops]") {
  // Split along M (m >= n), along N (n > m), below the split size, and pieces of uneven size.
  const std::vector<Case> cases = {{1000, 37, 130}, {40, 2000, 64}, {8, 8, 8}, {515, 515, 9}};
  for (const Case& c : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int threads : {1, 2}) {
          INFO(c.m << "x" << c.n << "x" << c.k << " ta " << ta << " tb " << tb << " threads "
                   << threads);
          check_case(c, ta, tb, threads);
        }
}

TEST_CASE("gemm_onto_bias: every row starts as the bias, split or not", "[ops]") {
  // (m, n, k): split along M, along N, no split, and K = 0 (only the bias).
  const std::vector<Case> cases = {{700, 48, 64}, {40, 1500, 64}, {5, 7, 3}, {300, 200, 0}};
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      INFO(c.m << "x" << c.n << "x" << c.k << " threads " << threads);
      Generator g(3);
      const std::vector<float> a = randn({c.m * c.k}, g).to_vector<float>();
      const std::vector<float> w = randn({c.n * c.k}, g).to_vector<float>();  // (n, k): B^T
      const std::vector<float> bias = randn({c.n}, g).to_vector<float>();
      std::vector<float> out(static_cast<size_t>(c.m * c.n), -7.0f);
      const int prev = num_threads();
      set_num_threads(threads);
      blas::gemm_onto_bias<float>(false, true, c.m, c.n, c.k, a.data(), c.k, w.data(), c.k,
                                  bias.data(), out.data(), c.n);
      set_num_threads(prev);
      double worst = 0;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double want = bias[static_cast<size_t>(j)];
          for (int64_t p = 0; p < c.k; ++p)
            want +=
                double(a[static_cast<size_t>(i * c.k + p)]) * w[static_cast<size_t>(j * c.k + p)];
          worst = std::max(worst, std::abs(out[static_cast<size_t>(i * c.n + j)] - want) /
                                      (1.0 + std::abs(want)));
        }
      CHECK(worst < 1e-4);
    }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
