// scaled_dot_product_attention, the fused flash-style kernel: PyTorch parity, gradcheck and
// gradgradcheck, agreement with the composite twin (masks, causal, dropout, several tiles,
// strided views, empty dims), fully masked rows, memory linear in the length, errors.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::check_parity;
using test::leaf;

namespace {

const std::string kFamily = "sdpa";

Tensor sdpa3(const std::vector<Tensor>& x) {
  return scaled_dot_product_attention(x[0], x[1], x[2]);
}

// The fused op and the composite on the same inputs: forward within 1e-5 (float32) / 1e-12
// (float64), and gradients for the same upstream gradient likewise. A generator is rebuilt for
// each side, so dropout draws identical masks.
void check_agree(const std::vector<Tensor>& in, SdpaOptions o, uint64_t seed = 3) {
  const double tol = in[0].dtype() == kFloat64 ? 1e-12 : 2e-5;
  Generator gf(seed), gc(seed);
  o.generator = &gf;
  Tensor yf = scaled_dot_product_attention(in[0], in[1], in[2], o);
  o.generator = &gc;
  Tensor yc = scaled_dot_product_attention_composite(in[0], in[1], in[2], o);
  CHECK(gf.offset() == gc.offset());
  CHECK_CLOSE(yf, yc, tol, 0.0);
  Generator g(seed + 1);
  Tensor gout = randn(yf.shape(), g, yf.dtype());
  auto a = autograd::grad({yf}, in, {gout});
  auto b = autograd::grad({yc}, in, {gout});
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("gradient " << i);
    CHECK_CLOSE(a[i], b[i], tol * 10, 0.0);
  }
}

std::vector<Tensor> qkv(int64_t N, int64_t L, int64_t S, int64_t E, int64_t Ev, DType dt,
                        uint64_t seed = 1) {
  Generator g(seed);
  return {randn({N, L, E}, g, dt).requires_grad_(), randn({N, S, E}, g, dt).requires_grad_(),
          randn({N, S, Ev}, g, dt).requires_grad_()};
}

}  // namespace

TEST_CASE("parity: scaled_dot_product_attention", "[ops][parity]") {
  for (std::string c : {"basic", "cross_lengths", "unbatched"}) check_parity(kFamily, c, sdpa3);
  check_parity(kFamily, "scale", [](auto& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], {.scale = 0.3});
  });
  check_parity(kFamily, "causal", [](auto& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true});
  });
  for (std::string c : {"bool_mask", "additive_mask"})
    check_parity(kFamily, c, [](auto& x) {
      return scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = x[3]});
    });
  check_parity(kFamily, "causal_bool_mask", [](auto& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = x[3], .is_causal = true});
  });
}

TEST_CASE("scaled_dot_product_attention passes gradcheck", "[ops]") {
  Tensor qt = leaf({2, 4, 3}, 1).detach().mT().requires_grad_();  // (2, 3, 4), non-contiguous
  REQUIRE(!qt.is_contiguous());
  // (B, H, L, d) heads of (B, L, H, d) memory: the output and dq are written in that layout.
  auto heads = [](int64_t L, int64_t d, uint64_t seed) {
    return leaf({2, L, 2, d}, seed).detach().permute({0, 2, 1, 3}).requires_grad_();
  };
  Generator mask_gen(4);
  Tensor keep = lt(rand({2, 1, 5}, mask_gen), 0.7);
  Tensor additive = leaf({3, 5}, 9).detach();
  struct Case {
    std::string name;
    std::vector<Tensor> in;
    SdpaOptions o;
  };
  std::vector<Case> cases = {
      {"4-D", {leaf({2, 2, 3, 4}, 1), leaf({2, 2, 5, 4}, 2), leaf({2, 2, 5, 3}, 3)}, {}},
      {"transposed q", {qt, leaf({2, 5, 4}, 2), leaf({2, 5, 2}, 3)}, {}},
      {"head views", {heads(3, 4, 1), heads(5, 4, 2), heads(5, 3, 3)}, {.is_causal = true}},
      {"bool mask broadcast",
       {leaf({2, 3, 4}, 1), leaf({2, 5, 4}, 2), leaf({2, 5, 2}, 3)},
       {.attn_mask = keep}},
      {"additive mask",
       {leaf({2, 3, 4}, 1), leaf({2, 5, 4}, 2), leaf({2, 5, 2}, 3)},
       {.attn_mask = additive}},
      {"causal", {leaf({2, 5, 3}, 1), leaf({2, 5, 3}, 2), leaf({2, 5, 2}, 3)}, {.is_causal = true}},
      {"size-1 dims", {leaf({1, 1, 1}, 1), leaf({1, 1, 1}, 2), leaf({1, 1, 1}, 3)}, {}},
      {"empty L", {leaf({2, 0, 3}, 1), leaf({2, 4, 3}, 2), leaf({2, 4, 2}, 3)}, {}},
      {"empty S", {leaf({2, 3, 3}, 1), leaf({2, 0, 3}, 2), leaf({2, 0, 2}, 3)}, {}},
      {"empty E", {leaf({2, 3, 0}, 1), leaf({2, 4, 0}, 2), leaf({2, 4, 2}, 3)}, {}},
      {"empty batch", {leaf({0, 3, 2}, 1), leaf({0, 4, 2}, 2), leaf({0, 4, 2}, 3)}, {}},
  };
  for (auto& c : cases) {
    INFO(c.name);
    auto fn = [o = c.o](const std::vector<Tensor>& x) {
      return scaled_dot_product_attention(x[0], x[1], x[2], o);
    };
    CHECK_GRADCHECK(fn, c.in);
  }
  SECTION("with dropout: one fixed mask per evaluation") {
    auto fn = [](const std::vector<Tensor>& x) {
      Generator g(21);
      return scaled_dot_product_attention(x[0], x[1], x[2], {.dropout_p = 0.3, .generator = &g});
    };
    CHECK_GRADCHECK(
        fn, (std::vector<Tensor>{leaf({2, 4, 3}, 1), leaf({2, 6, 3}, 2), leaf({2, 6, 2}, 3)}));
  }
  SECTION("gradgradcheck through the create_graph formula") {
    auto fn = [keep](const std::vector<Tensor>& x) {
      Generator g(5);
      return scaled_dot_product_attention(
          x[0], x[1], x[2],
          {.attn_mask = keep, .dropout_p = 0.2, .is_causal = true, .generator = &g});
    };
    CHECK_GRADGRADCHECK(
        fn, (std::vector<Tensor>{leaf({2, 3, 2}, 1), leaf({2, 5, 2}, 2), leaf({2, 5, 2}, 3)}));
  }
}

TEST_CASE("fused attention equals its composite twin", "[ops]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    SECTION("several query and key tiles, causal or not, with dropout") {
      for (bool causal : {false, true})
        for (double p : {0.0, 0.25}) {
          INFO("causal " << causal << " p " << p);
          check_agree(qkv(2, 150, 300, 8, 5, dt), {.dropout_p = p, .is_causal = causal});
        }
    }
    SECTION("masks broadcast from (B, 1, S), (L, S) and (B, H, L, S)") {
      Generator g(8);
      auto in = qkv(6, 70, 270, 4, 4, dt);
      Tensor padding = lt(rand({6, 1, 270}, g), 0.8);
      Tensor additive = mul(randn({70, 270}, g, dt), 2.0);
      check_agree(in, {.attn_mask = padding});
      check_agree(in, {.attn_mask = additive, .is_causal = true});
      Tensor full_mask = lt(rand({2, 3, 70, 270}, g), 0.5);
      std::vector<Tensor> in4;
      for (const Tensor& t : in) in4.push_back(t.detach().unflatten(0, {2, 3}).requires_grad_());
      check_agree(in4, {.attn_mask = full_mask, .dropout_p = 0.1});
      // Masks whose key dim is not unit-stride: a transposed view, a broadcast (L, 1) column.
      Tensor keep_t = lt(rand({270, 70}, g), 0.7).transpose(0, 1);
      REQUIRE(keep_t.stride(-1) != 1);
      check_agree(in, {.attn_mask = keep_t});
      check_agree(in, {.attn_mask = mul(randn({270, 70}, g, dt), 2.0).transpose(0, 1)});
      check_agree(in, {.attn_mask = lt(rand({70, 1}, g), 0.7), .is_causal = true});
    }
    SECTION("strided head views of one packed projection, as MultiheadAttention makes them") {
      Generator g(9);
      Tensor packed = randn({2, 33, 3 * 16}, g, dt).requires_grad_();  // (B, L, 3E), 4 heads
      auto heads = [&](int64_t block) {
        return packed.narrow(2, block * 16, 16).unflatten(2, {4, 4}).permute({0, 2, 1, 3});
      };
      std::vector<Tensor> in = {heads(0), heads(1), heads(2)};
      REQUIRE(!in[0].is_contiguous());
      Tensor yf = scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true});
      Tensor yc = scaled_dot_product_attention_composite(in[0], in[1], in[2], {.is_causal = true});
      CHECK_CLOSE(yf, yc, dt == kFloat64 ? 1e-12 : 2e-5, 0.0);
      // The output lies in memory like q, so merging the heads back is a free view.
      CHECK(yf.permute({0, 2, 1, 3}).is_contiguous());
      Tensor gout = randn(yf.shape(), g, dt);
      Tensor a = autograd::grad({yf}, {packed}, {gout})[0];
      Tensor b = autograd::grad({yc}, {packed}, {gout})[0];
      CHECK_CLOSE(a, b, dt == kFloat64 ? 1e-11 : 2e-4, 0.0);
    }
  }
}

TEST_CASE("fused attention: fully masked queries give zero output and zero gradients", "[ops]") {
  auto in = qkv(2, 3, 4, 2, 2, kFloat64);
  // Query 1 of batch 0 sees no key; every query of batch 1 sees key 0 only.
  Tensor keep = zeros({2, 3, 4}, kBool);
  for (int64_t l : {0, 2}) keep.select(0, 0).select(0, l).fill_(1);
  keep.select(0, 1).select(1, 0).fill_(1);
  Tensor y = scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = keep});
  CHECK(sum(abs(y.select(0, 0).select(0, 1))).item() == 0.0);
  CHECK_CLOSE(y.select(0, 1), in[2].select(0, 1).select(0, 0).unsqueeze(0).expand({3, 2}), 1e-12,
              0.0);
  auto g = autograd::grad({sum(y)}, in);
  CHECK(sum(abs(g[0].select(0, 0).select(0, 1))).item() == 0.0);
  CHECK(std::isfinite(sum(g[0]).item()));
  check_agree(in, {.attn_mask = keep});
}

TEST_CASE("fused attention's extra memory grows linearly with the length", "[ops][memory]") {
  // One (N, T, T) float32 weight tensor is 2 * T * T * 4 bytes = 8 MiB at T = 1024; the fused
  // forward and backward together must stay far below one of them.
  auto peak_extra = [](int64_t T, bool fused) {
    auto in = qkv(2, T, T, 16, 16, kFloat32);
    const size_t before = allocator::stats().allocated_bytes;
    allocator::reset_peak();
    Tensor y =
        fused ? scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true})
              : scaled_dot_product_attention_composite(in[0], in[1], in[2], {.is_causal = true});
    autograd::backward({sum(y)});
    return static_cast<double>(allocator::stats().peak_allocated_bytes - before);
  };
  const double fused512 = peak_extra(512, true), fused1024 = peak_extra(1024, true);
  const double composite1024 = peak_extra(1024, false);
  INFO("fused 512: " << fused512 << " B, fused 1024: " << fused1024
                     << " B, composite 1024: " << composite1024 << " B");
  CHECK(fused1024 < 2.5 * fused512);               // linear, not quadratic (which would be 4x)
  CHECK(fused1024 < 2.0 * 1024 * 1024 * 4 / 8.0);  // an eighth of one weight tensor
  CHECK(composite1024 > 2.0 * 1024 * 1024 * 4);    // the twin does materialise the weights
}

TEST_CASE("scaled_dot_product_attention rejects bad input", "[ops]") {
  Tensor q = zeros({2, 3, 4}), k = zeros({2, 5, 4}), v = zeros({2, 5, 2});
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, zeros({2, 5, 3}), v),
                    Contains("scaled_dot_product_attention") && Contains("(2, 5, 3)"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, zeros({3, 5, 2})), Contains("(3, 5, 2)"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v.to(kFloat64)), Contains("float64"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 4})}),
                    Contains("does not broadcast") && Contains("(2, 3, 5)"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 5}, kInt64)}),
                    Contains("attn_mask") && Contains("int64"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}),
                    Contains("dropout_p"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(zeros({4}), zeros({4}), zeros({4})),
                    Contains("(..., L, E)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
