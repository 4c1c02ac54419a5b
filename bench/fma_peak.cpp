// fma_peak: the machine's measured peak single-precision throughput, the yardstick for gemm.
// Each thread runs a loop of independent AVX2 fused multiply-adds (enough accumulators to hide
// the FMA latency on every x86 core with two FMA pipes); --threads threads run it at once under
// OpenMP. Reports the median over --reps runs of the total GFLOP/s (1 FMA = 2 flop):
//   RESULT bench=fma_peak gflops=<total> threads=<n> per_thread_gflops=<total/n>
// On a CPU without FMA it falls back to a scalar multiply-add loop and says so (isa=scalar).
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <array>

#include "bench/common.h"

namespace {

constexpr int kAcc = 12;  // independent chains: > latency (4-5 cycles) x 2 pipes

// acc = acc * a + b on kAcc x 8 lanes, iters times: kAcc * 8 * 2 flop per iteration. a < 1 keeps
// every chain bounded; the sum is returned so the loop cannot be optimised away.
__attribute__((target("avx2,fma"))) float fma_loop(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  __m256 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kAcc; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  float total = 0;
  for (float v : out) total += v;
  return total;
}

float scalar_loop(int64_t iters) {
  std::array<float, kAcc * 8> acc{};
  for (int64_t i = 0; i < iters; ++i) {
    for (float& v : acc) v = v * 0.999999f + 1e-6f;
  }
  float total = 0;
  for (float v : acc) total += v;
  return total;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"Peak single-precision FMA throughput of this machine"};
  nabla::bench::Options opt;
  opt.reps = 20;
  int64_t iters = int64_t{1} << 23;
  nabla::bench::add_common_options(app, opt);
  app.add_option("--iters", iters, "loop iterations per thread per run")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(opt.threads);

  const bool has_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  volatile float sink = 0;
  auto run = [&] {
    float total = 0;
#pragma omp parallel reduction(+ : total)
    total += has_fma ? fma_loop(iters) : scalar_loop(iters);
    sink = sink + total;
  };
  const nabla::bench::Timing t = nabla::bench::time_it(opt, run);
  const double flop = static_cast<double>(opt.threads) * static_cast<double>(iters) * kAcc * 8 * 2;
  const double gflops = flop / (t.median_ms * 1e6);
  fmt::print("RESULT bench=fma_peak gflops={:.1f} threads={} per_thread_gflops={:.1f} isa={}\n",
             gflops, opt.threads, gflops / opt.threads, has_fma ? "avx2_fma" : "scalar");
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_fma_peak: {}\n", e.what());
  return 1;
}
