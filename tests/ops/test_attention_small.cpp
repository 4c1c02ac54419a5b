// scaled_dot_product_attention's small-head path (ops/kernels/small_gemm.h: register tiles instead
// of one BLAS call per product) against the BLAS path of the same fused kernel, both forced through
// the machine profile: forward and every gradient, float32 and float64, masks, causal, dropout at a
// fixed seed, odd sizes, non-contiguous operands. Only the products' summation order differs, so
// with unit-normal inputs (outputs and gradients O(1)) they agree within 1e-5 / 1e-4 absolute in
// float32 (forward / gradients) and 1e-12 / 1e-11 in float64. Plus float64 gradcheck on the path.
#include "nabla/core/machine.h"
#include "nabla/ops/kernels/attention.h"
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::leaf;

namespace {

machine::Profile with_small_bounds(int64_t tokens, int64_t head_dim) {
  machine::Profile p = machine::profile();
  p.attention_small_max_tokens = tokens;
  p.attention_small_max_head_dim = head_dim;
  return p;
}

// Output and the three gradients for a fixed output gradient, on the small path or not.
std::vector<Tensor> run(const std::vector<Tensor>& in, SdpaOptions o, bool small) {
  machine::ProfileGuard guard(small ? with_small_bounds(128, 32) : with_small_bounds(0, 0));
  const int64_t L = in[0].size(-2), S = in[1].size(-2), E = in[0].size(-1), Ev = in[2].size(-1);
  REQUIRE(kernels::uses_small_kernel({.L = L, .S = S, .E = E, .Ev = Ev}) == small);
  std::vector<Tensor> x;
  for (const Tensor& t : in) x.push_back(t.detach().requires_grad_());
  Generator gen(31);  // the same dropout counters on both paths
  o.generator = &gen;
  Tensor out = scaled_dot_product_attention(x[0], x[1], x[2], o);
  Generator gg(5);
  Tensor grad = randn(out.shape(), gg, out.dtype());
  out.backward(grad);
  return {out.detach(), x[0].grad(), x[1].grad(), x[2].grad()};
}

void check_paths_agree(const std::vector<Tensor>& in, const SdpaOptions& o) {
  const bool f64 = in[0].dtype() == kFloat64;
  const std::vector<Tensor> blas = run(in, o, false), small = run(in, o, true);
  CHECK_CLOSE(small[0], blas[0], f64 ? 1e-12 : 1e-5, 0.0);
  for (size_t i = 1; i < 4; ++i) {
    INFO("gradient " << i - 1);
    CHECK_CLOSE(small[i], blas[i], f64 ? 1e-11 : 1e-4, 0.0);
  }
}

std::vector<Tensor> qkv(int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev, DType dt) {
  Generator g(static_cast<uint64_t>(L * 1000 + S * 10 + E));
  return {randn({B, L, E}, g, dt), randn({B, S, E}, g, dt), randn({B, S, Ev}, g, dt)};
}

}  // namespace

TEST_CASE("attention: small-head path against the BLAS path", "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    SECTION("odd sizes, causal or not, with and without dropout") {
      for (auto [L, S, E, Ev] : std::vector<std::array<int64_t, 4>>{
               {1, 7, 3, 3}, {50, 50, 16, 16}, {17, 33, 17, 5}, {70, 128, 32, 1}, {128, 9, 2, 32}})
        for (bool causal : {false, true})
          for (double p : {0.0, 0.25}) {
            INFO("L " << L << " S " << S << " E " << E << " Ev " << Ev << " causal " << causal
                      << " p " << p);
            check_paths_agree(qkv(3, L, S, E, Ev, dt), {.dropout_p = p, .is_causal = causal});
          }
    }
    SECTION("masks: keep (B, 1, S), additive (L, S), rows that keep no key") {
      Generator g(8);
      auto in = qkv(2, 50, 50, 16, 16, dt);
      check_paths_agree(in, {.attn_mask = lt(rand({2, 1, 50}, g), 0.8), .dropout_p = 0.1});
      check_paths_agree(in, {.attn_mask = mul(randn({50, 50}, g, dt), 2.0), .is_causal = true});
      check_paths_agree(in, {.attn_mask = lt(rand({2, 50, 50}, g), 0.02)});
    }
    SECTION("non-contiguous: head views of one packed projection, a transposed q") {
      Generator g(9);
      Tensor packed = randn({2, 50, 3 * 64}, g, dt);  // (B, L, 3 d), 4 heads of 16
      auto heads = [&](int64_t block) {
        return packed.narrow(2, block * 64, 64).unflatten(2, {4, 16}).permute({0, 2, 1, 3});
      };
      check_paths_agree({heads(0), heads(1), heads(2)}, {.dropout_p = 0.2});
      auto in = qkv(3, 5, 9, 4, 3, dt);
      check_paths_agree({randn({3, 4, 5}, g, dt).mT(), in[1], in[2]}, {.is_causal = true});
    }
  }
}

TEST_CASE("attention: small-head path passes gradcheck", "[ops][kernels]") {
  machine::ProfileGuard guard(with_small_bounds(128, 32));
  Generator mask_gen(4);
  Tensor keep = lt(rand({2, 1, 7}, mask_gen), 0.7);
  auto fn = [&keep](const std::vector<Tensor>& x) {
    Generator g(21);
    return scaled_dot_product_attention(x[0], x[1], x[2],
                                        {.attn_mask = keep, .dropout_p = 0.3, .generator = &g});
  };
  CHECK_GRADCHECK(
      fn, (std::vector<Tensor>{leaf({2, 5, 3}, 1), leaf({2, 7, 3}, 2), leaf({2, 7, 4}, 3)}));
  auto causal = [](const std::vector<Tensor>& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true});
  };
  CHECK_GRADCHECK(
      causal, (std::vector<Tensor>{leaf({1, 1, 1}, 1), leaf({1, 1, 1}, 2), leaf({1, 1, 1}, 3)}));
  CHECK_GRADCHECK(
      causal, (std::vector<Tensor>{leaf({2, 6, 17}, 1), leaf({2, 6, 17}, 2), leaf({2, 6, 2}, 3)}));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
