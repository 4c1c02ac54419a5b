// small_gemm (ops/kernels/small_gemm.h) against a float64 triple loop on random shapes (every
// operand layout, row strides wider than the rows, partial row tiles and vectors, the 8 x 8
// transposed blocks and their edges, alpha and beta, beta == 0 ignoring NaN in C, columns past n
// untouched), and blas::gemm's routing of small products to it (the avx2 row) against the
// OpenBLAS path (the avx512 row) through matmul and linear.
#include <cmath>
#include <random>
#include <vector>

#include "nabla/core/machine.h"
#include "nabla/ops/kernels/small_gemm.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

template <class T>
void check_random_products(uint32_t seed, int64_t max_dim, int count) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dim(0, max_dim), pad(0, 3);
  std::normal_distribution<double> normal;
  for (int it = 0; it < count; ++it) {
    const bool ta = gen() & 1, tb = gen() & 1;
    const int64_t m = dim(gen), n = dim(gen), k = dim(gen);
    const int64_t lda = std::max<int64_t>(1, (ta ? m : k) + pad(gen));
    const int64_t ldb = std::max<int64_t>(1, (tb ? k : n) + pad(gen));
    const int64_t ldc = n + pad(gen);
    const T alpha = (gen() & 1) ? T(1) : T(0.75);
    const int beta_kind = static_cast<int>(gen() % 3);
    const T beta = beta_kind == 0 ? T(0) : (beta_kind == 1 ? T(1) : T(-0.5));
    std::vector<T> a(static_cast<size_t>((ta ? k : m) * lda + 1));
    std::vector<T> b(static_cast<size_t>((tb ? n : k) * ldb + 1));
    std::vector<T> c(static_cast<size_t>(m * ldc + 1));
    for (T& x : a) x = static_cast<T>(normal(gen));
    for (T& x : b) x = static_cast<T>(normal(gen));
    for (T& x : c) x = beta == T(0) ? T(NAN) : static_cast<T>(normal(gen));
    const std::vector<T> c0 = c;
    kernels::small_gemm::gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta,
                                 c.data(), ldc);
    int wrong = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const T got = c[static_cast<size_t>(i * ldc + j)];
        const T old = c0[static_cast<size_t>(i * ldc + j)];
        if (j >= n) {  // past the product's columns: untouched
          wrong += !(got == old || (std::isnan(got) && std::isnan(old)));
          continue;
        }
        double dot = 0;
        for (int64_t p = 0; p < k; ++p)
          dot += static_cast<double>(ta ? a[static_cast<size_t>(p * lda + i)]
                                        : a[static_cast<size_t>(i * lda + p)]) *
                 static_cast<double>(tb ? b[static_cast<size_t>(j * ldb + p)]
                                        : b[static_cast<size_t>(p * ldb + j)]);
        const double want = alpha * dot + (beta == T(0) ? 0.0 : beta * static_cast<double>(old));
        const double tol = (sizeof(T) == 4 ? 2e-5 : 1e-13) * (std::sqrt(double(k)) + 1);
        wrong += !(std::fabs(got - want) <= tol * (1 + std::fabs(want)));
      }
    INFO((ta ? "T" : "N") << (tb ? "T" : "N") << " " << m << " x " << n << " x " << k << " lda "
                          << lda << " ldb " << ldb << " ldc " << ldc << " alpha " << alpha
                          << " beta " << beta);
    REQUIRE(wrong == 0);
  }
}

}  // namespace

TEST_CASE("small_gemm equals a float64 triple loop on random shapes", "[ops][kernels]") {
  check_random_products<float>(3, 70, 1500);
  check_random_products<double>(4, 70, 600);
  check_random_products<float>(5, 9, 500);  // the edges: 0-9 rows, columns, depth
}

TEST_CASE("blas::gemm's small products on small_gemm agree with OpenBLAS", "[ops][kernels]") {
  Generator g(12);
  struct Case {
    Tensor a, b;
  };
  std::vector<Case> cases = {
      {randn({64, 32}, g), randn({64, 32}, g).t()},  // attention scores, B^T
      {randn({64, 64}, g), randn({64, 32}, g)},      // P V
      {randn({64, 64}, g).t(), randn({64, 32}, g)},  // P^T dO, A^T
      {randn({2, 4, 50, 16}, g), randn({2, 4, 50, 16}, g).transpose(-1, -2)},  // batched
      {randn({3, 7, 5}, g), randn({5, 9}, g)},   // broadcast, odd sizes
      {randn({1, 130}, g), randn({130, 1}, g)},  // one row, one column
      {randn({64, 64}, g, kFloat64), randn({64, 64}, g, kFloat64)},
      {randn({65, 64}, g), randn({64, 64}, g)}};  // past 64^3 multiply-adds: OpenBLAS in both
  machine::Profile small = machine::make_profile(machine::Isa::Avx2, machine::detect_caches());
  small.small_gemm_max_macs = 64 * 64 * 64;
  machine::Profile blas = small;
  blas.small_gemm_max_macs = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const Tensor& a = cases[i].a;
    const Tensor& b = cases[i].b;
    const Tensor exact = matmul(a.to(kFloat64), b.to(kFloat64));
    Tensor on, off;
    {
      machine::ProfileGuard guard(small);
      on = matmul(a, b);
    }
    {
      machine::ProfileGuard guard(blas);
      off = matmul(a, b);
    }
    const double tol = a.dtype() == kFloat64 ? 1e-12 : 1e-4;
    CHECK_CLOSE(on, exact.to(a.dtype()), tol, tol);
    CHECK_CLOSE(on, off, tol, tol);
  }
  // linear's bias path (blas::gemm_onto_bias): the classifier head of a small model.
  Tensor x = randn({32, 128}, g), w = randn({10, 128}, g), bias = randn({10}, g);
  Tensor on, off;
  {
    machine::ProfileGuard guard(small);
    on = linear(x, w, bias);
  }
  {
    machine::ProfileGuard guard(blas);
    off = linear(x, w, bias);
  }
  CHECK_CLOSE(on, off, 1e-4, 1e-4);
  CHECK_CLOSE(on, add(matmul(x.to(kFloat64), w.to(kFloat64).t()), bias.to(kFloat64)).to(kFloat32),
              1e-4, 1e-4);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
