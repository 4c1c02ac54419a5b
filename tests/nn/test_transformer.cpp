// Positional encodings, d2l's PositionWiseFFN / AddNorm / encoder, and PyTorch's
// TransformerEncoderLayer / TransformerEncoder: names, values against a hand composition,
// gradcheck on tiny float64 configurations, fully masked rows, errors.
#include <limits>
#include <map>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> keys(const nn::StateDict& d) {
  std::vector<std::string> out;
  for (auto& [k, t] : d) out.push_back(k);
  return out;
}

std::map<std::string, Tensor> by_name(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (auto& [k, t] : m.named_parameters()) out[k] = t;
  return out;
}

bool all_finite(const Tensor& t) {
  for (double x : t.to(kFloat64).to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

// Moves a module to float64 and gives every parameter random values (so zero biases and unit
// norm weights cannot hide a bug).
void randomize(nn::Module& m, uint64_t seed = 5) {
  m.to(kFloat64);
  Generator g(seed);
  NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.copy_(mul(randn(p.shape(), g, kFloat64), 0.5));
}

std::vector<Tensor> with_params(std::vector<Tensor> inputs, const nn::Module& m) {
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

}  // namespace

TEST_CASE("PositionalEncoding: d2l's sinusoidal table, added to the input", "[nn]") {
  nn::PositionalEncoding pe(6, 0.0, 50);
  CHECK(pe.state_dict().empty());  // P is a non-persistent buffer
  REQUIRE(pe.named_buffers().size() == 1);
  const Tensor& P = pe.table();
  REQUIRE(P.shape() == Shape{1, 50, 6});
  for (int64_t pos : {0, 1, 7, 49})
    for (int64_t i = 0; i < 3; ++i) {
      const double angle =
          static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(i) / 6.0);
      CHECK(P.select(1, pos).select(1, 2 * i).item() == Approx(std::sin(angle)).margin(1e-6));
      CHECK(P.select(1, pos).select(1, 2 * i + 1).item() == Approx(std::cos(angle)).margin(1e-6));
    }
  Tensor x = randn({2, 5, 6});
  CHECK_CLOSE(pe(x), add(x, P.narrow(1, 0, 5)), 0, 0);
  // An odd width keeps the sin/cos alternation.
  Tensor odd = nn::sinusoidal_table(3, 5, kFloat64);
  CHECK(odd.select(0, 2).select(0, 4).item() ==
        Approx(std::sin(2.0 / std::pow(10000.0, 4.0 / 5.0))));

  pe.to(kFloat64);
  CHECK(pe.table().dtype() == kFloat64);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return pe(in[0]); },
                  std::vector<Tensor>{test::leaf({2, 3, 6})});
  CHECK_THROWS_WITH(pe(randn({1, 51, 6}, kFloat64)),
                    Contains("PositionalEncoding") && Contains("(1, 51, 6)"));
  CHECK_THROWS_AS(pe(randn({1, 5, 6})), DTypeError);

  nn::PositionalEncoding drop(6, 0.5);
  Tensor y = drop(zeros({4, 10, 6}));
  auto v = y.to_vector<float>();
  CHECK(std::count(v.begin(), v.end(), 0.f) > 60);  // training mode: dropout after the sum
}

TEST_CASE("LearnedPositionalEncoding: a trained table", "[nn]") {
  nn::LearnedPositionalEncoding pe(/*d_model=*/4, /*dropout=*/0.0, /*max_len=*/8);
  CHECK(keys(pe.state_dict()) == std::vector<std::string>{"weight"});
  CHECK(pe.weight().shape() == Shape{1, 8, 4});
  CHECK(max(abs(pe.weight())).item() <= 2.0);  // trunc_normal(std 0.02) in [-2, 2]
  CHECK(nabla::std(pe.weight()).item() < 0.05);
  randomize(pe);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return pe(in[0]); },
                  with_params({test::leaf({2, 5, 4})}, pe));
  CHECK_THROWS_AS(pe(randn({1, 9, 4}, kFloat64)), ShapeError);
}

TEST_CASE("PositionWiseFFN and AddNorm", "[nn]") {
  nn::PositionWiseFFN ffn(3, 5, 2, nn::FFNActivation::GELU);
  CHECK(keys(ffn.state_dict()) ==
        std::vector<std::string>{"dense1.weight", "dense1.bias", "dense2.weight", "dense2.bias"});
  randomize(ffn);
  auto p = by_name(ffn);
  Tensor x = test::leaf({2, 4, 3});
  CHECK_CLOSE(ffn(x),
              linear(gelu(linear(x, p["dense1.weight"], p["dense1.bias"])), p["dense2.weight"],
                     p["dense2.bias"]),
              1e-14, 0);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return ffn(in[0]); }, with_params({x}, ffn));

  nn::AddNorm an(4, 0.0);
  CHECK(keys(an.state_dict()) == std::vector<std::string>{"ln.weight", "ln.bias"});
  randomize(an);
  auto q = by_name(an);
  Tensor a = test::leaf({3, 4}, 1), b = test::leaf({3, 4}, 2);
  CHECK_CLOSE(an(a, b), layer_norm(add(a, b), {4}, q["ln.weight"], q["ln.bias"]), 1e-14, 0);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return an(in[0], in[1]); },
                  with_params({a, b}, an));
  CHECK_THROWS_WITH(an(a, test::leaf({3, 5})), Contains("AddNorm") && Contains("(3, 5)"));
}

TEST_CASE("TransformerEncoderLayer: PyTorch names and computation order", "[nn]") {
  nn::TransformerEncoderLayer layer(4, 2, 6);
  CHECK(keys(layer.state_dict()) ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                 "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                                 "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"});
  std::vector<std::string> mods;
  for (auto& [name, m] : layer.named_children()) mods.push_back(name);
  CHECK(mods == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1",
                                         "norm2", "dropout1", "dropout2"});

  for (bool norm_first : {false, true})
    for (auto act : {nn::FFNActivation::ReLU, nn::FFNActivation::GELU}) {
      nn::TransformerEncoderLayer l(4, 2, 6, 0.0, act, 1e-5, /*batch_first=*/false, norm_first);
      randomize(l);
      auto p = by_name(l);
      Tensor x = test::leaf({3, 2, 4});  // (S, B, E)
      Tensor kpm = from_vector<bool>({false, false, true, false, false, false}, {2, 3});
      auto sa = [&](const Tensor& h) {
        return l.self_attn()->forward(h, h, h, {.key_padding_mask = kpm}).output;
      };
      auto ff = [&](const Tensor& h) {
        return linear(nn::apply_activation(act, linear(h, p["linear1.weight"], p["linear1.bias"])),
                      p["linear2.weight"], p["linear2.bias"]);
      };
      auto n1 = [&](const Tensor& h) {
        return layer_norm(h, {4}, p["norm1.weight"], p["norm1.bias"]);
      };
      auto n2 = [&](const Tensor& h) {
        return layer_norm(h, {4}, p["norm2.weight"], p["norm2.bias"]);
      };
      Tensor expected;
      if (norm_first) {
        Tensor h = add(x, sa(n1(x)));
        expected = add(h, ff(n2(h)));
      } else {
        Tensor h = n1(add(x, sa(x)));
        expected = n2(add(h, ff(h)));
      }
      CHECK_CLOSE(l(x, Tensor(), kpm), expected, 1e-13, 0);
    }
}

TEST_CASE("TransformerEncoderLayer: gradcheck, post-norm and pre-norm", "[nn]") {
  SECTION("post-norm ReLU, seq-first, key padding") {
    nn::TransformerEncoderLayer l(4, 2, 6, 0.0);
    randomize(l);
    Tensor kpm = from_vector<bool>({false, false, true, false, false, false}, {2, 3});
    CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return l(in[0], Tensor(), kpm); },
                    with_params({test::leaf({3, 2, 4})}, l));
  }
  SECTION("pre-norm GELU, batch_first, causal, transposed input") {
    nn::TransformerEncoderLayer l(4, 1, 3, 0.0, nn::FFNActivation::GELU, 1e-5, true, true);
    randomize(l);
    Tensor x = test::leaf({4, 3, 2}).detach().permute({2, 1, 0}).requires_grad_();  // (2, 3, 4)
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) { return l(in[0], Tensor(), Tensor(), true); },
        with_params({x}, l));
  }
}

TEST_CASE("TransformerEncoder: layers.i and norm, gradcheck", "[nn]") {
  nn::TransformerEncoderLayerOptions o{
      .d_model = 4, .nhead = 2, .dim_feedforward = 5, .dropout = 0.0, .batch_first = true};
  nn::TransformerEncoder enc(o, 2, /*final_norm=*/true);
  auto k = keys(enc.state_dict());
  REQUIRE(k.size() == 2 * 12 + 2);
  CHECK(k[0] == "layers.0.self_attn.in_proj_weight");
  CHECK(k[12] == "layers.1.self_attn.in_proj_weight");
  CHECK(k[24] == "norm.weight");
  CHECK(enc.num_layers() == 2);
  // Layers are independent copies, not one shared layer.
  CHECK(!enc.layer(0)->self_attn()->in_proj_weight().same(
      enc.layer(1)->self_attn()->in_proj_weight()));
  randomize(enc);

  Tensor x = test::leaf({2, 3, 4});
  Tensor mask = test::leaf({3, 3}, 3).detach();  // float additive
  Tensor expected =
      enc.norm()->forward(enc.layer(1)->forward(enc.layer(0)->forward(x, mask), mask));
  CHECK_CLOSE(enc(x, mask), expected, 0, 0);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return enc(in[0], mask); },
                  with_params({x}, enc));

  auto shared = std::make_shared<nn::TransformerEncoderLayer>(o);
  CHECK_THROWS_WITH(nn::TransformerEncoder([&] { return shared; }, 2), Contains("same layer"));
  nn::TransformerEncoder no_norm([&] { return std::make_shared<nn::TransformerEncoderLayer>(o); },
                                 1);
  CHECK(no_norm.norm() == nullptr);
  CHECK(keys(no_norm.state_dict()).back() == "layers.0.norm2.bias");
}

TEST_CASE("Encoder layer: a fully masked row stays finite, with finite gradients", "[nn]") {
  for (bool norm_first : {false, true}) {
    nn::TransformerEncoderLayer l(4, 2, 6, 0.0, nn::FFNActivation::ReLU, 1e-5, true, norm_first);
    randomize(l);
    Tensor x = test::leaf({2, 3, 4});
    Tensor kpm = from_vector<bool>({false, true, false, true, true, true}, {2, 3});
    Tensor y = l(x, Tensor(), kpm);
    CHECK(all_finite(y));
    auto params = l.parameters();
    std::vector<Tensor> wrt = {x};
    wrt.insert(wrt.end(), params.begin(), params.end());
    for (const Tensor& g : autograd::grad({sum(mul(y, y))}, wrt, {}, false, false, true))
      if (g.defined()) CHECK(all_finite(g));
  }
}

TEST_CASE("D2lTransformerEncoder: embedding, positions, blocks with valid_lens", "[nn]") {
  nn::D2lTransformerEncoder enc(20, 8, 12, 2, 2, 0.0);
  auto k = keys(enc.state_dict());
  CHECK(k.front() == "embedding.weight");
  CHECK(k[1] == "blks.0.attention.in_proj_weight");  // use_bias = false: no in_proj_bias
  CHECK(k.back() == "blks.1.addnorm2.ln.bias");
  enc.eval();
  Tensor tokens = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  Tensor lens = from_vector<int64_t>({2, 5}, {2});
  Tensor y = enc(tokens, lens);
  CHECK(y.shape() == Shape{2, 5, 8});
  auto w = enc.attention_weights();
  REQUIRE(w.size() == 2);
  CHECK(w[1].shape() == Shape{2, 2, 5, 5});
  CHECK(max(abs(w[0].select(0, 0).narrow(2, 2, 3))).item() == 0);  // keys past valid_len
  CHECK_CLOSE(sum(w[0], {-1}), ones({2, 2, 5}), 1e-5, 0);

  // Block 0 by hand: X = pos(emb * sqrt(8)), then the block.
  Tensor x0 = nn::PositionalEncoding(
      8, 0.0)(mul(embedding(enc.state_dict()[0].second, tokens), std::sqrt(8.0)));
  CHECK_CLOSE(enc.block(1)->forward(enc.block(0)->forward(x0, lens), lens), y, 1e-5, 1e-5);

  nn::D2lTransformerEncoder tiny(5, 4, 3, 2, 1, 0.0, /*use_bias=*/true);
  randomize(tiny);
  Tensor t = from_vector<int64_t>({0, 4, 2, 1, 3, 3}, {2, 3});
  Tensor l2 = from_vector<int64_t>({3, 1}, {2});
  CHECK_GRADCHECK([&](const std::vector<Tensor>&) { return tiny(t, l2); }, tiny.parameters());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
