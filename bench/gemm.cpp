// gemm: float32 matrix products C = A @ B, A (B, M, K), B (B, K, N), timed through nabla's matmul
// (--impl nabla) or by calling OpenBLAS's cblas_sgemm directly on preallocated buffers
// (--impl cblas), the floor nabla's matmul can reach. --shape is MxKxN, or BxMxKxN for a batch
// of B independent products. Prints flop=2*B*M*N*K so the runner can report GFLOP/s.
//
// The raw batched baseline runs the B products in an OpenMP loop, each with single-threaded BLAS
// (OpenBLAS does not spawn threads inside an OpenMP region): the best plain cblas can do for many
// small products.
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: matmul vs raw cblas_sgemm"};
  bench::Options opt;
  std::string shape = "2048x128x384", impl = "nabla";
  bench::add_common_options(app, opt);
  app.add_option("--shape", shape, "MxKxN or BxMxKxN");
  app.add_option("--impl", impl, "nabla | cblas")->check(CLI::IsMember({"nabla", "cblas"}));
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  std::vector<int64_t> d = bench::parse_dims(shape);
  if (d.size() == 3) d.insert(d.begin(), 1);
  if (d.size() != 4) throw std::invalid_argument("--shape wants MxKxN or BxMxKxN, got " + shape);
  const int64_t B = d[0], M = d[1], K = d[2], N = d[3];

  Generator gen(0);
  // A is (B, M, K), Bm is (B, K, N); a 2-D product when B == 1, as a model would call it.
  Shape a_shape = B > 1 ? Shape{B, M, K} : Shape{M, K};
  Shape b_shape = B > 1 ? Shape{B, K, N} : Shape{K, N};
  Tensor a = randn(a_shape, gen), bm = randn(b_shape, gen);
  Tensor c = zeros(B > 1 ? Shape{B, M, N} : Shape{M, N});
  const double base_rss = bench::peak_rss_mb();

  bench::Timing t;
  if (impl == "nabla") {
    NoGradGuard no_grad;
    t = bench::time_it(opt, [&] { matmul(a, bm); });
  } else {
    const float* ap = a.data_ptr<float>();
    const float* bp = bm.data_ptr<float>();
    float* cp = c.data_ptr<float>();
    const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
    auto one = [&](int64_t i) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, ap + i * M * K, k,
                  bp + i * K * N, n, 0.0f, cp + i * M * N, n);
    };
    if (B == 1) {
      t = bench::time_it(opt, [&] { one(0); });
    } else {
      t = bench::time_it(opt, [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < B; ++i) one(i);
      });
    }
  }
  bench::report(t, base_rss, {{"flop", std::to_string(2 * B * M * N * K)}, {"impl", impl}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_gemm: {}\n", e.what());
  return 1;
}
