// fma_peak: the machine's measured peak single-precision throughput, the yardstick for gemm.
// Each thread runs a loop of independent fused multiply-adds of the widest vectors the CPU has
// (AVX-512 if present, else AVX2; enough accumulators to hide the FMA latency on every x86 core
// with two FMA pipes); --threads threads run it at once under OpenMP. Reports the median over
// --reps runs of the total GFLOP/s (1 FMA = 2 flop):
//   RESULT bench=fma_peak gflops=<total> threads=<n> per_thread_gflops=<total/n> isa=<isa>
// NOTE: the ISA matters. On an Intel core with two 512-bit FMA pipes AVX-512 doubles the peak
// (measured 490 vs 265 GFLOP/s on 2 threads), and OpenBLAS uses it (its SkylakeX kernels); on
// AMD Zen 4, which splits 512-bit FMAs in two, both give the same number. A yardstick below what
// the GEMM library can use would overstate every peak fraction.
// On a CPU without FMA it falls back to a scalar multiply-add loop and says so (isa=scalar).
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <array>

#include "bench/common.h"

namespace {

constexpr int kAcc = 12;  // independent chains: > latency (4-5 cycles) x 2 pipes

// The same loop on 16 lanes: kAcc * 16 * 2 flop per iteration.
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  __m512 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kAcc; ++j) s = _mm512_add_ps(s, acc[j]);
  // Not _mm512_reduce_add_ps: GCC 12's expansion trips -Wuninitialized (_mm256_undefined_pd).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float total = 0;
  for (const float v : lanes) total += v;
  return total;
}

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

  enum class Isa { kScalar, kAvx2, kAvx512 };
  Isa isa = Isa::kScalar;
  if (__builtin_cpu_supports("avx512f")) {
    isa = Isa::kAvx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isa = Isa::kAvx2;
  }
  volatile float sink = 0;
  auto run = [&] {
    float total = 0;
#pragma omp parallel reduction(+ : total)
    total += isa == Isa::kAvx512 ? fma_loop_avx512(iters)
             : isa == Isa::kAvx2 ? fma_loop(iters)
                                 : scalar_loop(iters);
    sink = sink + total;
  };
  const nabla::bench::Timing t = nabla::bench::time_it(opt, run);
  const double lanes = isa == Isa::kAvx512 ? 16 : 8;
  const double flop =
      static_cast<double>(opt.threads) * static_cast<double>(iters) * kAcc * lanes * 2;
  const double gflops = flop / (t.median_ms * 1e6);
  fmt::print("RESULT bench=fma_peak gflops={:.1f} threads={} per_thread_gflops={:.1f} isa={}\n",
             gflops, opt.threads, gflops / opt.threads,
             isa == Isa::kAvx512 ? "avx512_fma"
             : isa == Isa::kAvx2 ? "avx2_fma"
                                 : "scalar");
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_fma_peak: {}\n", e.what());
  return 1;
}
