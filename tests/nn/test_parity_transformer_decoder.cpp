// PyTorch parity for TransformerDecoderLayer, TransformerDecoder and Transformer: outputs and the
// gradients of every input and parameter (tests/nn/module_parity.h), both norm orders, padding on
// both sides, bool and float masks, the is_causal flags in place of the masks, bias = false.
// Fixture: tests/fixtures/gen_transformer_decoder.py.
#include "tests/nn/module_parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

using test::check_module_parity;
constexpr const char* kFamily = "transformer_decoder";

nn::TransformerLayerOptions layer_options(int64_t nhead, int64_t ff) {
  return {.d_model = 8, .nhead = nhead, .dim_feedforward = ff, .dropout = 0.0};
}

std::vector<Tensor> one(const Tensor& t) { return {t}; }

}  // namespace

TEST_CASE("parity: TransformerDecoderLayer post-norm ReLU, causal tgt_mask or tgt_is_causal",
          "[nn][parity]") {
  nn::TransformerDecoderLayer l(layer_options(2, 16));
  check_module_parity(kFamily, "layer_post_relu", l, [&](const std::vector<Tensor>& in) {
    return one(l(in[0], in[1], {.tgt_mask = in[2]}));
  });
  check_module_parity(kFamily, "layer_post_relu", l, [&](const std::vector<Tensor>& in) {
    return one(l(in[0], in[1], {.tgt_is_causal = true}));
  });
}

TEST_CASE("parity: TransformerDecoderLayer pre-norm GELU batch_first with both padding masks",
          "[nn][parity]") {
  auto o = layer_options(2, 16);
  o.activation = nn::FFNActivation::GELU, o.batch_first = true, o.norm_first = true;
  nn::TransformerDecoderLayer l(o);
  check_module_parity(kFamily, "layer_pre_gelu_padding", l, [&](const std::vector<Tensor>& in) {
    return one(
        l(in[0], in[1],
          {.tgt_mask = in[2], .tgt_key_padding_mask = in[3], .memory_key_padding_mask = in[4]}));
  });
  check_module_parity(kFamily, "layer_pre_gelu_padding", l, [&](const std::vector<Tensor>& in) {
    return one(l(
        in[0], in[1],
        {.tgt_key_padding_mask = in[3], .memory_key_padding_mask = in[4], .tgt_is_causal = true}));
  });
}

TEST_CASE("parity: TransformerDecoderLayer float (B*H, T, T) tgt_mask and (T, S) memory_mask",
          "[nn][parity]") {
  nn::TransformerDecoderLayer l(layer_options(4, 12));
  check_module_parity(kFamily, "layer_float_masks", l, [&](const std::vector<Tensor>& in) {
    return one(l(in[0], in[1],
                 {.tgt_mask = in[2], .memory_mask = in[3], .memory_key_padding_mask = in[4]}));
  });
}

TEST_CASE("parity: TransformerDecoderLayer memory_mask or memory_is_causal", "[nn][parity]") {
  auto o = layer_options(2, 16);
  o.norm_first = true;
  nn::TransformerDecoderLayer l(o);
  check_module_parity(kFamily, "layer_memory_causal", l, [&](const std::vector<Tensor>& in) {
    return one(l(in[0], in[1], {.tgt_mask = in[2], .memory_mask = in[3]}));
  });
  check_module_parity(kFamily, "layer_memory_causal", l, [&](const std::vector<Tensor>& in) {
    return one(l(in[0], in[1], {.tgt_is_causal = true, .memory_is_causal = true}));
  });
}

TEST_CASE("parity: TransformerDecoderLayer unbatched (T, E) and (S, E)", "[nn][parity]") {
  nn::TransformerDecoderLayer l(layer_options(2, 16));
  check_module_parity(kFamily, "layer_unbatched", l,
                      [&](const std::vector<Tensor>& in) { return one(l(in[0], in[1])); });
}

TEST_CASE("parity: TransformerDecoderLayer bias = false", "[nn][parity]") {
  auto o = layer_options(2, 16);
  o.batch_first = true, o.bias = false;
  nn::TransformerDecoderLayer l(o);
  for (const auto& [name, p] : l.named_parameters()) CHECK(name.find("bias") == std::string::npos);
  check_module_parity(kFamily, "layer_nobias", l, [&](const std::vector<Tensor>& in) {
    return one(l(in[0], in[1], {.tgt_mask = in[2]}));
  });
}

TEST_CASE("parity: TransformerDecoder, 2 post-norm layers and a final norm, padding",
          "[nn][parity]") {
  auto o = layer_options(2, 16);
  o.batch_first = true;
  nn::TransformerDecoder dec(o, 2, /*final_norm=*/true);
  check_module_parity(kFamily, "decoder_post_norm", dec, [&](const std::vector<Tensor>& in) {
    return one(
        dec(in[0], in[1],
            {.tgt_mask = in[2], .tgt_key_padding_mask = in[3], .memory_key_padding_mask = in[4]}));
  });
}

TEST_CASE("parity: TransformerDecoder, 2 pre-norm GELU layers, no final norm", "[nn][parity]") {
  auto o = layer_options(2, 16);
  o.activation = nn::FFNActivation::GELU, o.norm_first = true;
  nn::TransformerDecoder dec(o, 2);
  CHECK(dec.norm() == nullptr);
  check_module_parity(kFamily, "decoder_pre_no_norm", dec, [&](const std::vector<Tensor>& in) {
    return one(dec(in[0], in[1], {.tgt_is_causal = true}));
  });
}

TEST_CASE("parity: Transformer post-norm, seq-first, padding on source and memory",
          "[nn][parity]") {
  nn::Transformer t({.d_model = 8,
                     .nhead = 2,
                     .num_encoder_layers = 2,
                     .num_decoder_layers = 2,
                     .dim_feedforward = 16,
                     .dropout = 0.0});
  check_module_parity(kFamily, "transformer_post", t, [&](const std::vector<Tensor>& in) {
    return one(
        t(in[0], in[1],
          {.tgt_mask = in[2], .src_key_padding_mask = in[3], .memory_key_padding_mask = in[4]}));
  });
}

TEST_CASE("parity: Transformer pre-norm GELU batch_first with every mask", "[nn][parity]") {
  nn::Transformer t({.d_model = 8,
                     .nhead = 2,
                     .num_encoder_layers = 2,
                     .num_decoder_layers = 2,
                     .dim_feedforward = 16,
                     .dropout = 0.0,
                     .activation = nn::FFNActivation::GELU,
                     .batch_first = true,
                     .norm_first = true});
  check_module_parity(kFamily, "transformer_pre_gelu", t, [&](const std::vector<Tensor>& in) {
    return one(t(in[0], in[1],
                 {.src_mask = in[2],
                  .tgt_mask = in[3],
                  .memory_mask = in[4],
                  .src_key_padding_mask = in[5],
                  .tgt_key_padding_mask = in[6],
                  .memory_key_padding_mask = in[7]}));
  });
  check_module_parity(kFamily, "transformer_pre_gelu", t, [&](const std::vector<Tensor>& in) {
    return one(t(in[0], in[1],
                 {.src_key_padding_mask = in[5],
                  .tgt_key_padding_mask = in[6],
                  .memory_key_padding_mask = in[7],
                  .src_is_causal = true,
                  .tgt_is_causal = true,
                  .memory_is_causal = true}));
  });
}

TEST_CASE("parity: Transformer pre-norm with bias = false", "[nn][parity]") {
  nn::Transformer t({.d_model = 8,
                     .nhead = 2,
                     .num_encoder_layers = 2,
                     .num_decoder_layers = 2,
                     .dim_feedforward = 16,
                     .dropout = 0.0,
                     .norm_first = true,
                     .bias = false});
  check_module_parity(kFamily, "transformer_nobias", t, [&](const std::vector<Tensor>& in) {
    return one(t(in[0], in[1], {.tgt_mask = in[2]}));
  });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
