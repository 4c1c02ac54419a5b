// scaled_dot_product_attention: the tuned tiled kernel (ops/kernels/attention.cpp) against the
// reference per-query loop (ops/attention.cpp), forward and backward, float32 and float64: several
// query and key tiles, masks, causal, dropout, strided head views, sizes 0 and 1. The two sum in
// different orders (and float32's tuned exp is vec_math's), so they agree within a tolerance:
// inputs are unit normal, outputs and gradients O(1); float32 within 2e-5 (forward) and 2e-4
// (gradients) absolute, float64 within 1e-12 and 1e-11. The dropout mask is the same bit for bit.
#include "tests/ops/kernel_compare.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::compare_kernels;
using test::KernelComparison;

namespace {

std::vector<Tensor> qkv(const Shape& lead, int64_t L, int64_t S, int64_t E, int64_t Ev, DType dt,
                        uint64_t seed = 1) {
  Generator g(seed);
  auto shape = [&](int64_t rows, int64_t cols) {
    Shape s = lead;
    s.push_back(rows);
    s.push_back(cols);
    return s;
  };
  return {randn(shape(L, E), g, dt).requires_grad_(), randn(shape(S, E), g, dt).requires_grad_(),
          randn(shape(S, Ev), g, dt).requires_grad_()};
}

void check_agree(const std::vector<Tensor>& in, SdpaOptions o) {
  const bool f64 = in[0].dtype() == kFloat64;
  auto fn = [o](const std::vector<Tensor>& x) mutable {
    Generator gen(31);  // rebuilt per call: both kernels see the same dropout counters
    o.generator = &gen;
    return scaled_dot_product_attention(x[0], x[1], x[2], o);
  };
  const KernelComparison c = compare_kernels(fn, in);
  CHECK(c.tuned.strides() == c.reference.strides());
  CHECK_CLOSE(c.tuned, c.reference, f64 ? 1e-12 : 2e-5, 0.0);
  for (size_t i = 0; i < 3; ++i) {
    INFO("gradient " << i);
    CHECK(c.tuned_grads[i].strides() == c.reference_grads[i].strides());
    CHECK_CLOSE(c.tuned_grads[i], c.reference_grads[i], f64 ? 1e-11 : 2e-4, 0.0);
  }
}

}  // namespace

TEST_CASE("attention: tuned kernel against the reference, shapes and options", "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    SECTION("several query and key tiles, causal or not, with and without dropout") {
      for (bool causal : {false, true})
        for (double p : {0.0, 0.25}) {
          INFO("causal " << causal << " p " << p);
          check_agree(qkv({2}, 150, 300, 8, 5, dt), {.dropout_p = p, .is_causal = causal});
        }
    }
    SECTION("sizes 0 and 1") {
      for (auto [L, S, E, Ev] : std::vector<std::array<int64_t, 4>>{
               {1, 1, 1, 1}, {0, 4, 3, 2}, {3, 0, 3, 2}, {3, 4, 0, 2}, {3, 4, 2, 0}}) {
        INFO("L " << L << " S " << S << " E " << E << " Ev " << Ev);
        check_agree(qkv({2}, L, S, E, Ev, dt), {.dropout_p = 0.5});
        check_agree(qkv({0}, L, S, E, Ev, dt), {});
      }
    }
    SECTION("masks broadcast from (B, 1, S), (L, S) and (B, H, L, S), fully masked rows") {
      Generator g(8);
      auto in = qkv({2, 3}, 70, 270, 4, 4, dt);
      check_agree(in, {.attn_mask = lt(rand({2, 1, 1, 270}, g), 0.8)});
      check_agree(in, {.attn_mask = mul(randn({70, 270}, g, dt), 2.0), .is_causal = true});
      Tensor sparse = lt(rand({2, 3, 70, 270}, g), 0.01);  // some rows keep no key at all
      check_agree(in, {.attn_mask = sparse, .dropout_p = 0.1});
    }
    SECTION("strided: head views of one packed projection, a transposed q") {
      Generator g(9);
      Tensor packed = randn({2, 33, 3 * 16}, g, dt).requires_grad_();  // (B, L, 3E), 4 heads
      auto heads = [&](int64_t block) {
        return packed.narrow(2, block * 16, 16).unflatten(2, {4, 4}).permute({0, 2, 1, 3});
      };
      check_agree({heads(0), heads(1), heads(2)}, {.dropout_p = 0.2, .is_causal = true});
      auto in = qkv({3}, 5, 9, 4, 3, dt);
      Tensor qt = randn({3, 4, 5}, g, dt).mT().requires_grad_();  // (3, 5, 4), not contiguous
      check_agree({qt, in[1], in[2]}, {});
    }
  }
}

TEST_CASE("attention: tuned and reference kernels drop the same weights", "[ops][kernels]") {
  // With V = I (S x S), O = P * Z: a weight is exactly 0 where it was dropped. S = 100 fits one
  // key tile (its dropout words are drawn as one run of counters), S = 257 spans two.
  for (int64_t S : {100, 257}) {
    INFO("S " << S);
    Generator g(12);
    Tensor q = randn({3, 70, 8}, g), k = randn({3, S, 8}, g),
           v = eq(arange(S).view({S, 1}), arange(S).view({1, S})).to(kFloat32).expand({3, S, S});
    Tensor out[2];
    for (bool tuned : {true, false}) {
      kernels::TunedKernelsGuard guard(tuned);
      Generator gen(77);
      gen.set_state(77, 5);  // the weights start at element 20 of a Philox block run
      out[tuned ? 0 : 1] =
          scaled_dot_product_attention(q, k, v, {.dropout_p = 0.4, .generator = &gen});
    }
    CHECK(test::bitwise_equal(eq(out[0], 0.0).to(kFloat32), eq(out[1], 0.0).to(kFloat32)));
    const double dropped = mean(eq(out[0], 0.0).to(kFloat64)).item();
    CHECK(dropped > 0.35);
    CHECK(dropped < 0.45);
    CHECK_CLOSE(out[0], out[1], 2e-6, 0.0);
    CHECK_FALSE(test::bitwise_equal(out[0], out[1]));  // two kernels did run
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
