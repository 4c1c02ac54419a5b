// TransformerDecoderLayer / TransformerDecoder / Transformer: PyTorch names, values against a hand
// composition, gradcheck on tiny float64 configurations, errors; and the encoder's named-mask
// forward (forward(x, {.is_causal = true})). PyTorch parity: test_parity_transformer_decoder.cpp.
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

// float64 and random values for every parameter (zero biases / unit norm weights hide bugs).
void randomize(nn::Module& m, uint64_t seed = 7) {
  m.to(kFloat64);
  Generator g(seed);
  NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.copy_(mul(randn(p.shape(), g, kFloat64), 0.5));
}

std::vector<Tensor> with_params(std::vector<Tensor> inputs, const nn::Module& m) {
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

Tensor causal_mask(int64_t n) { return gt(arange(n).view({1, n}), arange(n).view({n, 1})); }

nn::TransformerLayerOptions small(bool norm_first, bool batch_first = false) {
  return {.d_model = 4,
          .nhead = 2,
          .dim_feedforward = 6,
          .dropout = 0.0,
          .batch_first = batch_first,
          .norm_first = norm_first};
}

}  // namespace

TEST_CASE("TransformerDecoderLayer: PyTorch names and computation order", "[nn]") {
  nn::TransformerDecoderLayer layer(small(false));
  const auto k = keys(layer.state_dict());
  REQUIRE(k.size() == 18);
  CHECK(std::vector<std::string>(k.begin(), k.begin() + 5) ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                 "multihead_attn.in_proj_weight"});
  CHECK(k.back() == "norm3.bias");
  std::vector<std::string> mods;
  for (auto& [name, m] : layer.named_children()) mods.push_back(name);
  CHECK(mods == std::vector<std::string>{"self_attn", "multihead_attn", "linear1", "dropout",
                                         "linear2", "norm1", "norm2", "norm3", "dropout1",
                                         "dropout2", "dropout3"});

  for (bool norm_first : {false, true}) {
    nn::TransformerDecoderLayer l(small(norm_first));
    randomize(l);
    std::map<std::string, Tensor> p;
    for (auto& [name, t] : l.named_parameters()) p[name] = t;
    Tensor x = test::leaf({3, 2, 4}), mem = test::leaf({5, 2, 4}, 2);  // (T, B, E), (S, B, E)
    Tensor kpm = from_vector<bool>(
        {false, false, false, true, false, false, true, false, false, false}, {2, 5});
    auto sa = [&](const Tensor& h) {
      return l.self_attn()->forward(h, h, h, {.is_causal = true}).output;
    };
    auto ca = [&](const Tensor& h) {
      return l.multihead_attn()->forward(h, mem, mem, {.key_padding_mask = kpm}).output;
    };
    auto ff = [&](const Tensor& h) {
      return linear(relu(linear(h, p["linear1.weight"], p["linear1.bias"])), p["linear2.weight"],
                    p["linear2.bias"]);
    };
    auto norm = [&](int i, const Tensor& h) {
      const std::string n = "norm" + std::to_string(i);
      return layer_norm(h, {4}, p[n + ".weight"], p[n + ".bias"]);
    };
    Tensor h = x;
    if (norm_first) {
      h = add(h, sa(norm(1, h)));
      h = add(h, ca(norm(2, h)));
      h = add(h, ff(norm(3, h)));
    } else {
      h = norm(1, add(h, sa(h)));
      h = norm(2, add(h, ca(h)));
      h = norm(3, add(h, ff(h)));
    }
    CHECK_CLOSE(l(x, mem, {.memory_key_padding_mask = kpm, .tgt_is_causal = true}), h, 1e-13, 0);
  }
}

TEST_CASE("TransformerDecoderLayer: gradcheck, post-norm and pre-norm", "[nn]") {
  SECTION("post-norm ReLU, seq-first, causal and memory padding") {
    nn::TransformerDecoderLayer l(small(false));
    randomize(l);
    Tensor kpm = from_vector<bool>({false, false, true, false, false, false}, {2, 3});
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return l(in[0], in[1], {.memory_key_padding_mask = kpm, .tgt_is_causal = true});
        },
        with_params({test::leaf({2, 2, 4}), test::leaf({3, 2, 4}, 2)}, l));
  }
  SECTION("pre-norm GELU, batch_first, transposed memory") {
    auto o = small(true, true);
    o.activation = nn::FFNActivation::GELU;
    nn::TransformerDecoderLayer l(o);
    randomize(l);
    Tensor mem = test::leaf({4, 3, 2}, 3).detach().permute({2, 1, 0}).requires_grad_();
    CHECK_GRADCHECK(
        [&](const std::vector<Tensor>& in) {
          return l(in[0], in[1], {.tgt_mask = causal_mask(2)});
        },
        with_params({test::leaf({2, 2, 4}), mem}, l));
  }
}

TEST_CASE("TransformerDecoder and Transformer: names, composition, gradcheck", "[nn]") {
  nn::TransformerDecoder dec(small(false, true), 2, /*final_norm=*/true);
  auto k = keys(dec.state_dict());
  REQUIRE(k.size() == 2 * 18 + 2);
  CHECK(k[18] == "layers.1.self_attn.in_proj_weight");
  CHECK(k.back() == "norm.bias");
  randomize(dec);
  Tensor x = test::leaf({2, 3, 4}), mem = test::leaf({2, 2, 4}, 4);
  const nn::DecoderForwardOptions o{.tgt_is_causal = true};
  CHECK_CLOSE(dec(x, mem, o),
              dec.norm()->forward(dec.layer(1)->forward(dec.layer(0)->forward(x, mem, o), mem, o)),
              0, 0);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return dec(in[0], in[1], o); },
                  with_params({x, mem}, dec));

  nn::Transformer t({.d_model = 4,
                     .nhead = 2,
                     .num_encoder_layers = 1,
                     .num_decoder_layers = 1,
                     .dim_feedforward = 6,
                     .dropout = 0.0});
  k = keys(t.state_dict());
  CHECK(k.front() == "encoder.layers.0.self_attn.in_proj_weight");
  CHECK(std::find(k.begin(), k.end(), "encoder.norm.weight") != k.end());
  CHECK(k.back() == "decoder.norm.bias");
  // PyTorch's _reset_parameters: every matrix ~ U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
  const Tensor& w = t.decoder()->layer(0)->linear1()->weight();
  CHECK(max(abs(w)).item() <= std::sqrt(6.0 / (4 + 6)));
  randomize(t);
  Tensor src = test::leaf({3, 2, 4}, 5), tgt = test::leaf({2, 2, 4}, 6);
  Tensor memory = (*t.encoder())(src);
  CHECK_CLOSE(t(src, tgt, {.tgt_is_causal = true}),
              (*t.decoder())(tgt, memory, {.tgt_is_causal = true}), 0, 0);
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return t(in[0], in[1], {.tgt_is_causal = true}); },
      with_params({src, tgt}, t));
}

TEST_CASE("Transformer layers: bias = false leaves out every bias", "[nn]") {
  auto o = small(false);
  o.bias = false;
  nn::TransformerEncoderLayer enc(o);
  CHECK(keys(enc.state_dict()) == std::vector<std::string>{"self_attn.in_proj_weight",
                                                           "self_attn.out_proj.weight",
                                                           "linear1.weight", "linear2.weight",
                                                           "norm1.weight", "norm2.weight"});
  nn::Transformer t({.d_model = 4,
                     .nhead = 2,
                     .num_encoder_layers = 1,
                     .num_decoder_layers = 1,
                     .dim_feedforward = 6,
                     .dropout = 0.0,
                     .bias = false});
  for (const auto& k : keys(t.state_dict())) CHECK(k.find("bias") == std::string::npos);
  CHECK(t.state_dict().size() == 6 + 1 + 9 + 1);  // encoder layer, its norm, decoder layer, norm
}

TEST_CASE("Transformer: generate_square_subsequent_mask is PyTorch's", "[nn]") {
  Tensor m = nn::Transformer::generate_square_subsequent_mask(3, kFloat64);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(m.to_vector<double>() == std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0});
  CHECK(nn::Transformer::generate_square_subsequent_mask(0).numel() == 0);
  CHECK_THROWS_AS(nn::Transformer::generate_square_subsequent_mask(-1), ValueError);
}

TEST_CASE("Transformer decoder: bad input gives clear errors", "[nn]") {
  CHECK_THROWS_WITH(
      nn::TransformerDecoderLayer(nn::TransformerLayerOptions{.d_model = 6, .nhead = 4}),
      Contains("TransformerDecoderLayer") && Contains("divisible"));
  nn::TransformerDecoderLayer l(small(false));
  l.to(kFloat64);
  CHECK_THROWS_WITH(l(test::leaf({2, 2, 4}), Tensor()), Contains("memory is undefined"));
  CHECK_THROWS_WITH(l(test::leaf({2, 2, 4}), test::leaf({3, 2, 5})),
                    Contains("MultiheadAttention") && Contains("(3, 2, 5)"));
  CHECK_THROWS_WITH(l(test::leaf({2, 2, 4}), test::leaf({3, 2, 4}),
                      {.memory_key_padding_mask = from_vector<bool>({false, true}, {1, 2})}),
                    Contains("key_padding_mask") && Contains("(2, 3)"));
  auto o = small(false);
  auto shared = std::make_shared<nn::TransformerDecoderLayer>(o);
  CHECK_THROWS_WITH(nn::TransformerDecoder([&] { return shared; }, 2), Contains("same layer"));
  CHECK_THROWS_WITH(nn::TransformerDecoder(o, -1), Contains("num_layers"));
  nn::Transformer t({.d_model = 4,
                     .nhead = 2,
                     .num_encoder_layers = 1,
                     .num_decoder_layers = 1,
                     .dim_feedforward = 6});
  CHECK_THROWS_WITH(t(test::leaf({3, 2, 4}), test::leaf({2, 3, 4})),
                    Contains("Transformer") && Contains("(3, 2, 4)") && Contains("(2, 3, 4)"));
  CHECK_THROWS_WITH(t(test::leaf({3, 2, 4}), test::leaf({2, 2, 5})), Contains("(2, 2, 5)"));
}

TEST_CASE("TransformerEncoder: named masks, forward(x, {.is_causal = true})", "[nn]") {
  nn::TransformerEncoder enc(small(true, true), 2, true);
  randomize(enc);
  Tensor x = test::leaf({2, 3, 4});
  Tensor kpm = from_vector<bool>({false, false, true, false, false, false}, {2, 3});
  CHECK_CLOSE(enc(x, {.is_causal = true}), enc(x, causal_mask(3)), 0, 0);
  CHECK_CLOSE(enc(x, {.src_mask = causal_mask(3), .src_key_padding_mask = kpm}),
              enc(x, causal_mask(3), kpm), 0, 0);
  nn::TransformerEncoderLayer layer(small(false));
  randomize(layer);
  Tensor y = test::leaf({3, 2, 4});
  CHECK_CLOSE(layer(y, {.is_causal = true}), layer(y, Tensor(), Tensor(), true), 0, 0);
  CHECK_CLOSE(layer(y, {.src_mask = causal_mask(3)}), layer(y, causal_mask(3)), 0, 0);
  // Causal really hides the later positions: changing the last one leaves the first unchanged.
  Tensor y2 = y.detach().clone();
  {
    NoGradGuard g;
    y2.select(0, 2).fill_(3.0);
  }
  CHECK_CLOSE(layer(y, {.is_causal = true}).select(0, 0),
              layer(y2, {.is_causal = true}).select(0, 0), 0, 0);
  CHECK(max(abs(sub(layer(y).select(0, 0), layer(y2).select(0, 0)))).item() > 1e-3);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
