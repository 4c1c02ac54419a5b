// nn::MultiheadAttention: PyTorch names and init, agreement with a per-head reference written the
// d2l way (W_q, W_k, W_v, W_o as the row blocks of in_proj_weight and out_proj), every mask kind,
// layouts, gradcheck on tiny float64 configurations, fully masked rows, dropout and errors.
#include <limits>
#include <optional>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::string> keys(const nn::StateDict& d) {
  std::vector<std::string> out;
  for (auto& [k, t] : d) out.push_back(k);
  return out;
}

// A float64 module with random biases (PyTorch's init zeroes them, which would hide bias bugs).
std::shared_ptr<nn::MultiheadAttention> make_mha(int64_t E, int64_t H, bool batch_first,
                                                 int64_t kdim = 0, int64_t vdim = 0,
                                                 bool bias = true) {
  Generator g(7);
  auto m = std::make_shared<nn::MultiheadAttention>(E, H, 0.0, bias, kdim, vdim, batch_first);
  m->reset_parameters(g);
  m->to(kFloat64);
  NoGradGuard no_grad;
  for (auto& [name, p] : m->named_parameters())
    if (name.find("bias") != std::string::npos) p.copy_(mul(randn(p.shape(), g, kFloat64), 0.3));
  return m;
}

// The d2l formulation, head by head: softmax(Q_h K_h^T / sqrt(d) + additive_h) V_h, heads
// concatenated, then W_o. q (B, L, E), k (B, S, kdim), v (B, S, vdim); additive (B, H, L, S).
Tensor reference(const nn::MultiheadAttention& m, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& additive = Tensor()) {
  const int64_t E = m.embed_dim(), H = m.num_heads(), d = E / H;
  auto block = [&](int64_t i) {
    return m.packed() ? m.in_proj_weight().narrow(0, i * E, E)
                      : (i == 0   ? m.q_proj_weight()
                         : i == 1 ? m.k_proj_weight()
                                  : m.v_proj_weight());
  };
  auto project = [&](const Tensor& x, int64_t i) {
    Tensor y = matmul(x, block(i).t());
    return m.in_proj_bias().defined() ? add(y, m.in_proj_bias().narrow(0, i * E, E)) : y;
  };
  Tensor Q = project(q, 0), K = project(k, 1), V = project(v, 2);
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    Tensor s = div(matmul(Q.narrow(2, h * d, d), K.narrow(2, h * d, d).mT()),
                   std::sqrt(static_cast<double>(d)));
    if (additive.defined()) s = add(s, additive.select(1, h));
    heads.push_back(matmul(softmax_composite(s, -1), V.narrow(2, h * d, d)));
  }
  Tensor y = matmul(cat(heads, 2), m.out_proj()->weight().t());
  return m.out_proj()->bias().defined() ? add(y, m.out_proj()->bias()) : y;
}

// An additive (B, H, L, S) mask that is -inf where `ignore(b, h, l, s)` holds.
template <class F>
Tensor additive_mask(int64_t B, int64_t H, int64_t L, int64_t S, F ignore) {
  std::vector<double> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t s = 0; s < S; ++s) v.push_back(ignore(b, h, l, s) ? -kInf : 0.0);
  return from_vector(v, {B, H, L, S});
}

bool all_finite(const Tensor& t) {
  for (double x : t.to(kFloat64).to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

// The module's parameters appended to `inputs`, so gradcheck perturbs (and checks) them too.
std::vector<Tensor> with_params(std::vector<Tensor> inputs, const nn::Module& m) {
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

}  // namespace

TEST_CASE("MultiheadAttention: PyTorch parameter names, shapes and init", "[nn]") {
  nn::MultiheadAttention self(8, 2);
  CHECK(keys(self.state_dict()) == std::vector<std::string>{"in_proj_weight", "in_proj_bias",
                                                            "out_proj.weight", "out_proj.bias"});
  CHECK(self.in_proj_weight().shape() == Shape{24, 8});
  CHECK(self.in_proj_bias().shape() == Shape{24});
  CHECK(self.packed());
  // xavier_uniform_ on (3E, E): bound sqrt(6 / (E + 3E)); biases start at zero.
  const double bound = std::sqrt(6.0 / 32.0);
  CHECK(max(abs(self.in_proj_weight())).item() <= bound);
  CHECK(max(abs(self.in_proj_weight())).item() > 0.5 * bound);
  CHECK(max(abs(self.in_proj_bias())).item() == 0);
  CHECK(max(abs(self.out_proj()->bias())).item() == 0);

  nn::MultiheadAttention cross(8, 4, 0.0, true, 5, 3);
  CHECK(keys(cross.state_dict()) == std::vector<std::string>{"q_proj_weight", "k_proj_weight",
                                                             "v_proj_weight", "in_proj_bias",
                                                             "out_proj.weight", "out_proj.bias"});
  CHECK(cross.k_proj_weight().shape() == Shape{8, 5});
  CHECK(cross.v_proj_weight().shape() == Shape{8, 3});
  CHECK(!cross.packed());

  nn::MultiheadAttention nobias(4, 1, 0.0, false);
  CHECK(keys(nobias.state_dict()) == std::vector<std::string>{"in_proj_weight", "out_proj.weight"});
}

TEST_CASE("MultiheadAttention: matches the per-head reference in every layout", "[nn]") {
  const int64_t B = 2, L = 3, S = 4, E = 6, H = 3;
  Tensor q = test::leaf({B, L, E}, 1), k = test::leaf({B, S, E}, 2), v = test::leaf({B, S, E}, 3);

  SECTION("self-attention, batch_first (one packed GEMM)") {
    auto m = make_mha(E, H, true);
    auto r = m->forward(k, k, k);
    CHECK_CLOSE(r.output, reference(*m, k, k, k), 1e-12, 1e-12);
    CHECK(r.weights.shape() == Shape{B, S, S});
  }
  SECTION("seq-first layout gives the transposed result") {
    auto m = make_mha(E, H, false);
    Tensor qs = q.transpose(0, 1).contiguous(), ks = k.transpose(0, 1).contiguous();
    auto r = m->forward(qs, ks, ks);  // key is value: the shared k/v GEMM
    CHECK(r.output.shape() == Shape{L, B, E});
    CHECK_CLOSE(r.output.transpose(0, 1), reference(*m, q, k, k), 1e-12, 1e-12);
    auto self = m->forward(qs, qs, qs);
    CHECK_CLOSE(self.output.transpose(0, 1), reference(*m, q, q, q), 1e-12, 1e-12);
  }
  SECTION("distinct query, key and value; non-contiguous inputs") {
    auto m = make_mha(E, H, true);
    Tensor vt = test::leaf({B, E, S}, 4).transpose(1, 2);  // (B, S, E), not contiguous
    auto r = m->forward(q, k, vt);
    CHECK_CLOSE(r.output, reference(*m, q, k, vt), 1e-12, 1e-12);
  }
  SECTION("cross-attention with kdim and vdim (text queries attending to image features)") {
    auto m = make_mha(E, H, true, 5, 7);
    Tensor kk = test::leaf({B, S, 5}, 5), vv = test::leaf({B, S, 7}, 6);
    auto r = m->forward(q, kk, vv);
    CHECK(r.output.shape() == Shape{B, L, E});
    CHECK_CLOSE(r.output, reference(*m, q, kk, vv), 1e-12, 1e-12);
  }
  SECTION("unbatched input") {
    for (bool bf : {true, false}) {
      auto m = make_mha(E, H, bf);
      auto r = m->forward(q.select(0, 1), k.select(0, 1), v.select(0, 1));
      CHECK(r.output.shape() == Shape{L, E});
      CHECK(r.weights.shape() == Shape{L, S});
      CHECK_CLOSE(r.output, reference(*m, q, k, v).select(0, 1), 1e-12, 1e-12);
    }
  }
  SECTION("no bias") {
    auto m = make_mha(E, H, true, 0, 0, false);
    CHECK_CLOSE(m->forward(q, k, v).output, reference(*m, q, k, v), 1e-12, 1e-12);
  }
}

TEST_CASE("MultiheadAttention: every mask kind matches the reference", "[nn]") {
  const int64_t B = 2, L = 3, S = 4, E = 4, H = 2;
  auto m = make_mha(E, H, true);
  Tensor q = test::leaf({B, L, E}, 1), k = test::leaf({B, S, E}, 2), v = test::leaf({B, S, E}, 3);
  auto check = [&](const nn::MhaOptions& o, auto ignore) {
    Tensor add_mask = additive_mask(B, H, L, S, ignore);
    CHECK_CLOSE(m->forward(q, k, v, o).output, reference(*m, q, k, v, add_mask), 1e-12, 1e-12);
  };
  // key_padding_mask (B, S): batch 0 ignores key 3, batch 1 keys 1 and 2.
  Tensor kpm = from_vector<bool>({false, false, false, true, false, true, true, false}, {B, S});
  auto kpm_ignore = [](int64_t b, int64_t, int64_t, int64_t s) {
    return b == 0 ? s == 3 : (s == 1 || s == 2);
  };
  auto causal = [](int64_t, int64_t, int64_t l, int64_t s) { return s > l; };

  SECTION("bool key_padding_mask") { check({.key_padding_mask = kpm}, kpm_ignore); }
  SECTION("float key_padding_mask is additive") {
    Tensor f = masked_fill(zeros({B, S}, kFloat64), kpm, -kInf);
    check({.key_padding_mask = f}, kpm_ignore);
  }
  SECTION("bool (L, S) attn_mask and is_causal") {
    Tensor causal_mask = gt(arange(S).view({1, S}), arange(L).view({L, 1}));
    check({.attn_mask = causal_mask}, causal);
    check({.is_causal = true}, causal);
  }
  SECTION("bool (B*H, L, S) attn_mask combined with key_padding_mask") {
    auto per_head = [](int64_t b, int64_t h, int64_t l, int64_t s) {
      return (b + h + l + s) % 3 == 0 && s != 0;
    };
    std::vector<bool> bits;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t l = 0; l < L; ++l)
          for (int64_t s = 0; s < S; ++s) bits.push_back(per_head(b, h, l, s));
    Tensor am = from_vector<bool>(bits, {B * H, L, S});
    check({.key_padding_mask = kpm, .attn_mask = am},
          [&](int64_t b, int64_t h, int64_t l, int64_t s) {
            return per_head(b, h, l, s) || kpm_ignore(b, h, l, s);
          });
  }
  SECTION("float attn_mask plus bool key_padding_mask plus causal") {
    Tensor fm = test::leaf({L, S}, 9).detach();
    Tensor expected_add =
        add(fm, additive_mask(B, H, L, S, [&](int64_t b, int64_t h, int64_t l, int64_t s) {
              return kpm_ignore(b, h, l, s) || causal(b, h, l, s);
            }));
    nn::MhaOptions o{.key_padding_mask = kpm, .attn_mask = fm, .is_causal = true};
    // Key 0 stays visible to every query, so no row is fully masked (the reference gives NaN).
    CHECK_CLOSE(m->forward(q, k, v, o).output, reference(*m, q, k, v, expected_add), 1e-12, 1e-12);
  }
  SECTION("valid_lens (B,) and (B, L), d2l style") {
    check({.valid_lens = from_vector<int64_t>({2, 4}, {B})},
          [](int64_t b, int64_t, int64_t, int64_t s) { return s >= (b == 0 ? 2 : 4); });
    Tensor per_query = from_vector<int64_t>({1, 2, 3, 4, 3, 2}, {B, L});
    check({.valid_lens = per_query}, [](int64_t b, int64_t, int64_t l, int64_t s) {
      const int64_t lens[2][3] = {{1, 2, 3}, {4, 3, 2}};
      return s >= lens[b][l];
    });
  }
}

TEST_CASE("MultiheadAttention: the fused path (need_weights off) equals the weights path", "[nn]") {
  const int64_t B = 2, L = 5, S = 7, E = 6, H = 3;
  Tensor q = test::leaf({B, L, E}, 1), k = test::leaf({B, S, E}, 2), v = test::leaf({B, S, E}, 3);
  Tensor kpm = from_vector<bool>({false, false, false, true, false, true, true,  //
                                  false, true, false, false, false, false, true},
                                 {B, S});
  Tensor fm = test::leaf({L, S}, 9).detach();
  Tensor lens = from_vector<int64_t>({3, 0}, {B});  // batch 1 attends to nothing
  for (double p : {0.0, 0.3}) {
    auto m = std::make_shared<nn::MultiheadAttention>(E, H, p, true, 0, 0, true);
    m->to(kFloat64);
    for (const nn::MhaOptions& base :
         {nn::MhaOptions{}, nn::MhaOptions{.key_padding_mask = kpm, .is_causal = true},
          nn::MhaOptions{.attn_mask = fm, .valid_lens = lens},
          nn::MhaOptions{.key_padding_mask = kpm, .attn_mask = fm, .is_causal = true}}) {
      INFO("p " << p << " masks " << base.key_padding_mask.defined() << base.attn_mask.defined()
                << base.is_causal << base.valid_lens.defined());
      Generator g(11);
      m->set_generator(g);
      nn::MhaOptions with = base, without = base;
      without.need_weights = false;
      without.path = nn::AttentionPath::Fused;  // these lengths would materialise by default
      Tensor a = m->forward(q, k, v, with).output;
      g.manual_seed(11);
      Tensor b = m->forward(q, k, v, without).output;
      CHECK_CLOSE(b, a, 1e-12, 0);
      Tensor gout = test::leaf({B, L, E}, 5).detach();
      auto ga = autograd::grad({a}, {q, k, v, m->in_proj_weight()}, {gout});
      auto gb = autograd::grad({b}, {q, k, v, m->in_proj_weight()}, {gout});
      for (size_t i = 0; i < ga.size(); ++i) CHECK_CLOSE(gb[i], ga[i], 1e-11, 0);
    }
  }
}

TEST_CASE("MultiheadAttention: short sequences materialise in inference only", "[nn]") {
  // Memory tells the paths apart: the fused kernel never allocates the (B, H, L, S) weights.
  const int64_t B = 2, E = 8, H = 2;
  auto m = std::make_shared<nn::MultiheadAttention>(E, H, 0.0, true, 0, 0, true);
  auto weights_allocated = [&](int64_t T, nn::AttentionPath path, bool grad) {
    Tensor x = randn({B, T, E});
    allocator::reset_peak();
    const size_t before = allocator::stats().allocated_bytes;
    EnableGradGuard mode(grad);
    Tensor y = m->forward(x, x, x, {.need_weights = false, .path = path}).output;
    const size_t extra = allocator::stats().peak_allocated_bytes - before;
    return extra >= static_cast<size_t>(B * H * T * T) * sizeof(float);
  };
  using nn::AttentionPath;
  // The avx512 and generic rows materialise up to 64 x 64 scores (core/machine.cpp).
  std::optional<machine::ProfileGuard> row(std::in_place, machine::Isa::Avx512);
  REQUIRE(machine::profile().attention_materialize_max_scores == 64 * 64);
  CHECK(weights_allocated(64, AttentionPath::Auto, false));
  CHECK(!weights_allocated(65, AttentionPath::Auto, false));  // just above: fused
  CHECK(!weights_allocated(64, AttentionPath::Auto, true));   // training: fused
  CHECK(!weights_allocated(64, AttentionPath::Fused, false));
  CHECK(weights_allocated(300, AttentionPath::Materialized, true));
  row.reset();
  {  // The avx2 row of a build with AVX fuses every head (small_gemm runs its products).
    machine::ProfileGuard avx2(machine::Isa::Avx2);
#if defined(__AVX__)
    CHECK(!weights_allocated(48, AttentionPath::Auto, false));
#else
    CHECK(weights_allocated(48, AttentionPath::Auto, false));
#endif
  }
  // The profile decides: a machine whose row stops at 32 x 32 fuses T = 33 already.
  machine::Profile small = machine::profile();
  small.attention_materialize_max_scores = 32 * 32;
  machine::ProfileGuard guard(small);
  CHECK(weights_allocated(32, AttentionPath::Auto, false));
  CHECK(!weights_allocated(33, AttentionPath::Auto, false));
}

TEST_CASE("MultiheadAttention: attention weights", "[nn]") {
  const int64_t B = 2, L = 3, S = 5, E = 4, H = 2;
  auto m = make_mha(E, H, true);
  Tensor q = test::leaf({B, L, E}, 1), k = test::leaf({B, S, E}, 2);
  Tensor kpm = from_vector<bool>(
      {false, false, false, true, true, false, false, false, false, false}, {B, S});
  auto per_head = m->forward(q, k, k, {.key_padding_mask = kpm, .average_attn_weights = false});
  REQUIRE(per_head.weights.shape() == Shape{B, H, L, S});
  // Rows are distributions, padded keys get zero weight.
  CHECK_CLOSE(sum(per_head.weights, {-1}), ones({B, H, L}, kFloat64), 1e-12, 0);
  CHECK(max(abs(per_head.weights.select(0, 0).narrow(2, 3, 2))).item() == 0);
  auto averaged = m->forward(q, k, k, {.key_padding_mask = kpm});
  CHECK_CLOSE(averaged.weights, mean(per_head.weights, {1}), 1e-14, 0);
  CHECK_CLOSE(averaged.output, per_head.output, 0, 0);
  auto none = m->forward(q, k, k, {.need_weights = false});
  CHECK(!none.weights.defined());
}

TEST_CASE("MultiheadAttention: gradcheck on tiny float64 configurations", "[nn]") {
  SECTION("self-attention, batch_first, with a key_padding_mask") {
    auto m = make_mha(4, 2, true);
    Tensor kpm = from_vector<bool>({false, false, true, false, false, false}, {2, 3});
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return m->forward(in[0], in[0], in[0], {.key_padding_mask = kpm}).output;
        },
        with_params({test::leaf({2, 3, 4})}, *m));
  }
  SECTION("seq-first, transposed non-contiguous input, causal, weights in the output") {
    auto m = make_mha(4, 2, false);
    Tensor x = test::leaf({4, 3, 2}, 3).detach().permute({1, 2, 0}).requires_grad_();  // (3, 2, 4)
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          auto r = m->forward(in[0], in[0], in[0], {.is_causal = true});
          return add(r.output, sum(mul(r.weights, r.weights), {-1}).transpose(0, 1).unsqueeze(-1));
        },
        with_params({x}, *m));
  }
  SECTION("cross-attention with kdim/vdim and per-head weights") {
    auto m = make_mha(4, 2, true, 3, 5);
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return m->forward(in[0], in[1], in[2], {.average_attn_weights = false}).weights;
        },
        with_params({test::leaf({2, 2, 4}, 1), test::leaf({2, 3, 3}, 2), test::leaf({2, 3, 5}, 3)},
                    *m));
  }
  SECTION("distinct q, k, v with per-query valid_lens and a float attn_mask") {
    auto m = make_mha(4, 1, true);
    Tensor lens = from_vector<int64_t>({1, 3, 2, 2}, {2, 2});
    Tensor fm = test::leaf({2, 3}, 8).detach();
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return m->forward(in[0], in[1], in[2], {.attn_mask = fm, .valid_lens = lens}).output;
        },
        with_params({test::leaf({2, 2, 4}, 1), test::leaf({2, 3, 4}, 2), test::leaf({2, 3, 4}, 3)},
                    *m));
  }
  SECTION("unbatched and a size-1 batch and sequence") {
    auto m = make_mha(2, 2, false);
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return m->forward(in[0], in[1], in[1]).output; },
        with_params({test::leaf({3, 2}, 1), test::leaf({1, 2}, 2)}, *m));
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return m->forward(in[0], in[0], in[0]).output; },
        with_params({test::leaf({1, 1, 2}, 4)}, *m));
  }
  SECTION("an empty batch") {
    auto m = make_mha(4, 2, true);
    Tensor x = test::leaf({0, 3, 4});
    auto r = m->forward(x, x, x);
    CHECK(r.output.shape() == Shape{0, 3, 4});
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return m->forward(in[0], in[0], in[0]).output; },
        with_params({x}, *m));
  }
  SECTION("double backward through the composite path") {
    auto m = make_mha(2, 1, true);
    CHECK_GRADGRADCHECK(
        [&](const std::vector<Tensor>& in) { return m->forward(in[0], in[0], in[0]).output; },
        std::vector<Tensor>{test::leaf({1, 2, 2})});
  }
}

TEST_CASE("MultiheadAttention: a fully masked row is finite, with finite gradients", "[nn]") {
  for (bool bf : {true, false}) {
    auto m = make_mha(4, 2, bf);
    Tensor x = test::leaf(bf ? Shape{2, 3, 4} : Shape{3, 2, 4});
    // batch 1 pads every key; batch 0 none.
    Tensor kpm = from_vector<bool>({false, false, false, true, true, true}, {2, 3});
    for (const nn::MhaOptions& o :
         {nn::MhaOptions{.key_padding_mask = kpm},
          nn::MhaOptions{.key_padding_mask = masked_fill(zeros({2, 3}, kFloat64), kpm, -kInf)},
          nn::MhaOptions{.valid_lens = from_vector<int64_t>({3, 0}, {2})}}) {
      auto r = m->forward(x, x, x, o);
      CHECK(all_finite(r.output));
      // The padded batch attends to nothing: its output is out_proj's bias.
      Tensor padded = bf ? r.output.select(0, 1) : r.output.select(1, 1);
      CHECK_CLOSE(padded, m->out_proj()->bias().expand({3, 4}), 1e-14, 0);
      CHECK(max(abs(r.weights.select(0, 1))).item() == 0);
      auto grads = autograd::grad({sum(mul(r.output, r.output))}, {x, m->in_proj_weight()});
      CHECK(all_finite(grads[0]));
      CHECK(all_finite(grads[1]));
    }
  }
}

TEST_CASE("MultiheadAttention: dropout on the attention weights in training mode only", "[nn]") {
  nn::MultiheadAttention m(4, 2, 0.5, true, 0, 0, true);
  Generator g(3);
  m.set_generator(g);
  Tensor x = randn({2, 6, 4});
  auto r = m.forward(x, x, x, {.average_attn_weights = false});
  auto w = r.weights.to_vector<float>();
  const auto zeros_count = std::count(w.begin(), w.end(), 0.f);
  CHECK(zeros_count > 20);  // ~half of 144 dropped
  CHECK(zeros_count < 124);
  g.manual_seed(3);
  auto again = m.forward(x, x, x, {.average_attn_weights = false});
  CHECK_CLOSE(again.output, r.output, 0, 0);  // the same seed gives the same masks
  m.eval();
  auto e = m.forward(x, x, x, {.average_attn_weights = false});
  CHECK_CLOSE(sum(e.weights, {-1}), ones({2, 2, 6}), 1e-5, 0);
}

TEST_CASE("MultiheadAttention: errors name the module and the shapes", "[nn]") {
  CHECK_THROWS_WITH(nn::MultiheadAttention(6, 4), Contains("MultiheadAttention") && Contains("6"));
  CHECK_THROWS_AS(nn::MultiheadAttention(4, 2, 1.5), ValueError);
  nn::MultiheadAttention m(4, 2, 0.0, true, 0, 0, true);
  Tensor x = randn({2, 3, 4});
  CHECK_THROWS_WITH(m.forward(randn({2, 3, 5}), x, x),
                    Contains("MultiheadAttention") && Contains("(2, 3, 5)"));
  CHECK_THROWS_AS(m.forward(randn({2, 3, 4}), x, randn({2, 2, 4})), ShapeError);
  CHECK_THROWS_AS(m.forward(randn({3, 4}), x, x), ShapeError);
  CHECK_THROWS_AS(m.forward(x.to(kFloat64), x, x), DTypeError);
  CHECK_THROWS_WITH(m.forward(x, x, x, {.key_padding_mask = zeros({2, 4}, kBool)}),
                    Contains("key_padding_mask") && Contains("(2, 3)") && Contains("(2, 4)"));
  CHECK_THROWS_AS(m.forward(x, x, x, {.key_padding_mask = zeros({2, 3}, kInt64)}), DTypeError);
  CHECK_THROWS_WITH(m.forward(x, x, x, {.attn_mask = zeros({3, 2}, kBool)}),
                    Contains("attn_mask") && Contains("(3, 2)") && Contains("(4, 3, 3)"));
  CHECK_THROWS_AS(m.forward(x, x, x, {.attn_mask = zeros({3, 3}, kFloat64)}), DTypeError);
  CHECK_THROWS_WITH(m.forward(x, x, x, {.valid_lens = zeros({3}, kInt64)}),
                    Contains("valid_lens") && Contains("(3,)"));
  CHECK_THROWS_AS(m.forward(x, x, x, {.valid_lens = zeros({2}, kFloat32)}), DTypeError);
  CHECK_THROWS_WITH(m.forward(x, x, x, {.valid_lens = from_vector<int64_t>({1, -2}, {2})}),
                    Contains("negative length -2"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
