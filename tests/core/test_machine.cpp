// The machine profile (core/machine.h): the table's rows, cache detection, forcing a row, what
// runtime_info() prints, and every CPU-dependent path forced in turn. Paths whose arithmetic is
// the same give the same bits (the parallel grain only decides how many threads run a loop whose
// result does not depend on it; the Philox paths compute the same words); where the profile
// changes the order of float operations (GEMM split points, attention key tiles) results agree
// within the bounds stated below.
#include <string>
#include <vector>

#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/onednn.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using machine::Isa;

namespace {

constexpr Isa kAllIsas[] = {Isa::Generic, Isa::Avx2, Isa::Avx512};

// Runs f under each row of the table (with this machine's caches) on two threads.
template <class F>
std::vector<std::vector<Tensor>> under_each_row(F&& f) {
  const int prev = num_threads();
  const bool adaptive = adaptive_threads();
  set_num_threads(2);
  set_adaptive_threads(false);
  std::vector<std::vector<Tensor>> out;
  for (Isa isa : kAllIsas) {
    machine::ProfileGuard guard(isa);
    out.push_back(f());
  }
  set_adaptive_threads(adaptive);
  set_num_threads(prev);
  return out;
}

}  // namespace

TEST_CASE("machine: cache sizes in sysfs's format", "[core]") {
  CHECK(machine::parse_cache_size("32K") == 32 << 10);
  CHECK(machine::parse_cache_size("1024K") == 1 << 20);
  CHECK(machine::parse_cache_size("2M") == 2 << 20);
  CHECK(machine::parse_cache_size("512") == 512);
  CHECK(machine::parse_cache_size("") == 0);
  CHECK(machine::parse_cache_size("K") == 0);
  CHECK(machine::parse_cache_size("12X") == 0);
  CHECK(machine::parse_cache_size("99999999999999999999999K") == 0);  // no overflow
}

TEST_CASE("machine: the table's rows", "[core]") {
  const machine::Caches big{32 << 10, 1 << 20, 32 << 20};
  // The AVX-512 row keeps the values measured before the table existed.
  const machine::Profile avx512 = machine::make_profile(Isa::Avx512, big);
  CHECK(avx512.parallel_grain == 131072);
  CHECK(avx512.gemm_min_split_flop == 1 << 21);
  CHECK(avx512.gemm_block_align == 16);
  CHECK(avx512.attention_key_tile == 256);
  CHECK(avx512.attention_materialize_max_scores == 64 * 64);
  CHECK(avx512.autocast_attention_onednn_min_macs == 64 * 64 * 32);
  CHECK(avx512.simd == Isa::Avx512);
  CHECK(avx512.prepacked_linear_min_flop == 1 << 19);  // measured on the Zen 4 (docs/perf.md)
  const machine::Profile avx2 = machine::make_profile(Isa::Avx2, big);
  CHECK(avx2.gemm_min_split_flop == 1 << 20);
  CHECK(avx2.gemm_block_align == 8);
  CHECK(avx2.prepacked_linear_min_flop == -1);  // OpenBLAS until measured
  // small_gemm where OpenBLAS has no small-matrix kernels, if the build has AVX registers.
#if defined(__AVX__)
  CHECK(avx2.small_gemm_max_macs == 64 * 64 * 64);
  CHECK(avx2.attention_small_max_tokens == 256);
  CHECK(avx2.attention_small_max_head_dim == 64);
  CHECK(avx2.attention_materialize_max_scores == 0);  // the fused kernel on small_gemm
#else
  CHECK(avx2.small_gemm_max_macs == 0);
  CHECK(avx2.attention_materialize_max_scores == 64 * 64);
#endif
  CHECK(avx512.small_gemm_max_macs == 0);
  CHECK(avx512.attention_small_max_tokens == 0);
  const machine::Profile generic = machine::make_profile(Isa::Generic, big);
  CHECK(generic.prepacked_linear_min_flop == -1);
  CHECK(generic.small_gemm_max_macs == 0);
  CHECK(generic.parallel_grain == 65536);
  CHECK(generic.gemm_min_split_flop == 1 << 19);
  // The key tile follows the L2: the backward's live tiles must fit it.
  auto tile_for_l2 = [](int64_t l2) {
    return machine::make_profile(Isa::Avx2, {32 << 10, l2, 0}).attention_key_tile;
  };
  CHECK(tile_for_l2(2 << 20) == 256);
  CHECK(tile_for_l2(1 << 20) == 256);
  CHECK(tile_for_l2(512 << 10) == 128);
  CHECK(tile_for_l2(256 << 10) == 64);
  CHECK(tile_for_l2(0) == 256);  // unknown: the measured value
}

TEST_CASE("machine: detected once, forced by a guard, reported by runtime_info", "[core]") {
  const machine::Profile& startup = machine::startup_profile();
  CHECK(startup.simd <= machine::detect_isa());
  if (std::getenv("NABLA_CPU_PROFILE") == nullptr) CHECK(startup.isa == machine::detect_isa());
  CHECK(&machine::profile() == &startup);
  // Linux reports the caches; this host has an L1d and an L2.
  const machine::Caches caches = machine::detect_caches();
  CHECK(caches.l1d >= 16 << 10);
  CHECK(caches.l2 >= 128 << 10);
  CHECK(caches == startup.caches);
  CHECK(runtime_info().find(machine::describe(startup)) != std::string::npos);
  const std::string row = std::string("machine profile ") + machine::isa_name(startup.isa) + " (";
  CHECK(runtime_info().find(row) != std::string::npos);
  {
    machine::ProfileGuard guard(Isa::Generic);
    CHECK(machine::profile().isa == Isa::Generic);
    CHECK(machine::profile().simd == Isa::Generic);
    CHECK(parallel_grain() == 65536);
    const std::string info = runtime_info();
    INFO(info);
    CHECK(info.find("machine profile generic (forced;") != std::string::npos);
    CHECK(info.find("parallel grain 65536") != std::string::npos);
    CHECK(info.find("GEMM split from 524288 FLOP in blocks of 16") != std::string::npos);
    {
      machine::ProfileGuard inner(Isa::Avx2);
      CHECK(machine::profile().isa == Isa::Avx2);
    }
    CHECK(machine::profile().isa == Isa::Generic);
  }
  CHECK(&machine::profile() == &startup);
  // A row above the CPU keeps the table's values but not its instructions.
  machine::ProfileGuard guard(Isa::Avx512);
  CHECK(machine::profile().simd == std::min(Isa::Avx512, machine::detect_isa()));
}

TEST_CASE("machine: every row gives the same bits for loops and dropout", "[core]") {
  // Sizes below, between and above the rows' grains (65536 and 131072 elements x cost).
  Generator g(4);
  std::vector<Tensor> inputs;
  for (int64_t rows : {20, 300, 700}) inputs.push_back(randn({rows, 256}, g));
  auto results = under_each_row([&] {
    std::vector<Tensor> out;
    for (const Tensor& x : inputs) {
      Generator dg(9);
      out.push_back(add(x, x));
      out.push_back(gelu(x));
      out.push_back(softmax(x, -1));
      out.push_back(layer_norm(x, {256}));
      out.push_back(sum(x, {0}));
      out.push_back(dropout(x, 0.3, true, dg));  // Philox words from each SIMD path
    }
    return out;
  });
  for (size_t row = 1; row < results.size(); ++row)
    for (size_t i = 0; i < results[0].size(); ++i) {
      INFO("row " << machine::isa_name(kAllIsas[row]) << " result " << i);
      CHECK_CLOSE(results[row][i], results[0][i], 0.0, 0.0);
    }
}

TEST_CASE("machine: every row's GEMM split agrees with the others and with float64", "[core]") {
  // 1.5 MFLOP (split by the avx2 and generic rows, whole in the avx512 row), and products whose
  // split points differ between blocks of 8 and of 16 rows or columns (340 / 2 = 170).
  Generator g(6);
  const std::vector<std::pair<Tensor, Tensor>> products = {
      {randn({100, 75}, g), randn({75, 100}, g)},
      {randn({340, 200}, g), randn({200, 100}, g)},
      {randn({90, 200}, g), randn({200, 340}, g)},
      {randn({340, 128}, g).t(), randn({340, 96}, g)}};
  auto results = under_each_row([&] {
    std::vector<Tensor> out;
    for (const auto& [a, b] : products) out.push_back(matmul(a, b));
    return out;
  });
  for (size_t i = 0; i < products.size(); ++i) {
    const Tensor exact = matmul(products[i].first.to(kFloat64), products[i].second.to(kFloat64));
    for (size_t row = 0; row < results.size(); ++row) {
      INFO("row " << machine::isa_name(kAllIsas[row]) << " product " << i);
      // float32 sums of at most 340 products of N(0, 1) values: within 1e-4 of the exact value
      // (relative to sqrt(K) ~ 18 in magnitude), and of each other.
      CHECK_CLOSE(results[row][i], exact.to(kFloat32), 2e-4, 1e-4);
      CHECK_CLOSE(results[row][i], results[0][i], 2e-4, 1e-4);
    }
  }
}

TEST_CASE("machine: OpenBLAS on narrower kernels than the CPU moves products elsewhere", "[core]") {
  // OpenBLAS's AVX2-or-older kernel sets on an AVX-512 CPU (Debian 12's OpenBLAS on a Zen 5, or
  // pinned there by OPENBLAS_CORETYPE); its AVX-512 sets, and every set on narrower CPUs, are not.
  CHECK(machine::blas_narrower_than_cpu(Isa::Avx512, "Haswell"));
  CHECK(machine::blas_narrower_than_cpu(Isa::Avx512, "Zen"));
  CHECK(machine::blas_narrower_than_cpu(Isa::Avx512, "Prescott"));
  CHECK_FALSE(machine::blas_narrower_than_cpu(Isa::Avx512, "SkylakeX"));
  CHECK_FALSE(machine::blas_narrower_than_cpu(Isa::Avx512, "COOPERLAKE"));
  CHECK_FALSE(machine::blas_narrower_than_cpu(Isa::Avx512, "SapphireRapids"));
  CHECK_FALSE(machine::blas_narrower_than_cpu(Isa::Avx2, "Haswell"));
  CHECK_FALSE(machine::blas_narrower_than_cpu(Isa::Generic, "Prescott"));
  const machine::Profile row = machine::make_profile(Isa::Avx512, {48 << 10, 1 << 20, 0});
  CHECK(row.onednn_sgemm_min_flop == -1);
  const machine::Profile adapted = machine::with_narrow_blas(row);
  CHECK(adapted.onednn_sgemm_min_flop == 0);
#if defined(__AVX__)  // small_gemm's vectors are the build's: without AVX the row keeps BLAS
  CHECK(adapted.small_gemm_max_macs == 64 * 64 * 64);
  CHECK(adapted.attention_materialize_max_scores == 0);
#else
  CHECK(adapted.small_gemm_max_macs == 0);
#endif
  // Everything else stays the avx512 row's.
  CHECK(adapted.gemm_min_split_flop == row.gemm_min_split_flop);
  CHECK(adapted.parallel_grain == row.parallel_grain);
  CHECK(adapted.prepacked_linear_min_flop == row.prepacked_linear_min_flop);
  CHECK_THAT(machine::describe(adapted),
             Catch::Matchers::Contains("float32 GEMMs on oneDNN's sgemm"));
  CHECK_THAT(machine::describe(row), Catch::Matchers::Contains("float32 GEMMs on OpenBLAS"));
}

TEST_CASE("machine: float32 products on oneDNN's sgemm agree with OpenBLAS's and float64",
          "[core]") {
  if (!onednn::available()) {
    WARN("built without oneDNN: only OpenBLAS's products run");
    return;
  }
  // Split and unsplit products, every transpose, a strided operand, K of 1, a bias, a batch;
  // on two threads, so the split blocks run each on one thread.
  Generator g(12);
  const Tensor bias = randn({67}, g);
  const Tensor batch_a = randn({3, 40, 90}, g), batch_b = randn({3, 90, 20}, g);
  const std::vector<std::pair<Tensor, Tensor>> products = {
      {randn({257, 129}, g), randn({129, 67}, g)},                   // 4.4 MFLOP: split
      {randn({300, 64}, g).t(), randn({33, 300}, g).t()},            // both transposed
      {randn({96, 70}, g), randn({67, 70}, g).t()},                  // unsplit, B transposed
      {randn({128, 90}, g).slice(1, 0, 90, 2), randn({45, 67}, g)},  // row stride 90
      {randn({200, 1}, g), randn({1, 67}, g)}};
  auto run = [&] {
    std::vector<Tensor> out;
    for (const auto& [a, b] : products) out.push_back(matmul(a, b));
    out.push_back(linear(products[0].first, products[0].second.t(), bias));  // gemm_onto_bias
    out.push_back(matmul(batch_a, batch_b));
    return out;
  };
  const int prev = num_threads();
  const bool adaptive = adaptive_threads();
  set_num_threads(2);
  set_adaptive_threads(false);
  machine::Profile with_blas = machine::make_profile(Isa::Avx512, machine::detect_caches());
  with_blas.small_gemm_max_macs = 0;  // every product through the backend under test
  machine::Profile with_dnnl = with_blas;
  with_dnnl.onednn_sgemm_min_flop = 0;
  std::vector<Tensor> blas, dnnl;
  {
    machine::ProfileGuard guard(with_blas);
    blas = run();
  }
  {
    machine::ProfileGuard guard(with_dnnl);
    dnnl = run();
  }
  set_adaptive_threads(adaptive);
  set_num_threads(prev);
  std::vector<Tensor> exact;
  for (const auto& [a, b] : products) exact.push_back(matmul(a.to(kFloat64), b.to(kFloat64)));
  exact.push_back(linear(products[0].first.to(kFloat64), products[0].second.t().to(kFloat64),
                         bias.to(kFloat64)));
  exact.push_back(matmul(batch_a.to(kFloat64), batch_b.to(kFloat64)));
  for (size_t i = 0; i < exact.size(); ++i) {
    INFO("product " << i);
    // float32 sums of at most 300 products of N(0, 1) values (sqrt(K) ~ 17 in magnitude).
    CHECK_CLOSE(dnnl[i], exact[i].to(kFloat32), 2e-4, 1e-4);
    CHECK_CLOSE(blas[i], exact[i].to(kFloat32), 2e-4, 1e-4);
    CHECK_CLOSE(dnnl[i], blas[i], 2e-4, 1e-4);
  }
}

TEST_CASE("machine: attention key tiles of 256, 128 and 64 agree with the reference", "[core]") {
  // Keys 300 (several tiles of every size, a ragged last one), queries 130 (three query tiles);
  // dropout, a float mask and causal masking together. Per dtype, the forward and the three
  // gradients of each key tile against the reference kernel (one query row at a time in double).
  for (DType dt : {kFloat32, kFloat64}) {
    Generator g(8);
    const Tensor q = randn({2, 3, 130, 16}, g, dt), k = randn({2, 3, 300, 16}, g, dt);
    const Tensor v = randn({2, 3, 300, 8}, g, dt), mask = randn({130, 300}, g, dt);
    const Tensor gout = randn({2, 3, 130, 8}, g, dt);
    auto run = [&](bool causal) {
      Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_();
      Tensor vl = v.detach().requires_grad_();
      Generator dg(3);
      Tensor out = scaled_dot_product_attention(
          ql, kl, vl, {.attn_mask = mask, .dropout_p = 0.2, .is_causal = causal, .generator = &dg});
      auto grads = autograd::grad({out}, {ql, kl, vl}, {gout});
      return std::vector<Tensor>{out, grads[0], grads[1], grads[2]};
    };
    for (bool causal : {false, true}) {
      std::vector<Tensor> reference;
      {
        kernels::TunedKernelsGuard off(false);
        reference = run(causal);
      }
      for (int64_t l2 : {1 << 20, 512 << 10, 256 << 10}) {
        machine::ProfileGuard guard(machine::make_profile(Isa::Avx2, {32 << 10, l2, 0}));
        const int64_t tile = l2 == (1 << 20) ? 256 : l2 == (512 << 10) ? 128 : 64;
        REQUIRE(machine::profile().attention_key_tile == tile);
        const std::vector<Tensor> tuned = run(causal);
        // float32: the online softmax rescales at each key tile and the tile GEMMs sum in
        // float, so results move by a few float32 ulps of values of order 1; float64: 1e-12.
        const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
        for (size_t i = 0; i < tuned.size(); ++i) {
          INFO(dtype_name(dt) << " causal " << causal << " key tile " << tile << " result " << i);
          CHECK_CLOSE(tuned[i], reference[i], tol, tol);
        }
      }
    }
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
