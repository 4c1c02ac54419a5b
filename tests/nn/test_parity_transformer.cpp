// PyTorch parity for MultiheadAttention, TransformerEncoderLayer, TransformerEncoder and ViT
// (tests/nn/module_parity.h). Fixture: tests/fixtures/gen_transformer.py.
#include "tests/nn/module_parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

using test::check_module_parity;

std::vector<Tensor> both(const nn::MhaOutput& r) { return {r.output, r.weights}; }

}  // namespace

TEST_CASE("parity: MultiheadAttention self-attention, seq-first, averaged weights",
          "[nn][parity]") {
  nn::MultiheadAttention m(8, 2);
  check_module_parity("transformer", "mha_self", m,
                      [&](const std::vector<Tensor>& in) { return both(m(in[0], in[0], in[0])); });
}

TEST_CASE("parity: MultiheadAttention cross-attention with kdim/vdim, per-head weights",
          "[nn][parity]") {
  nn::MultiheadAttention m(8, 2, 0.0, true, 5, 3, true);
  check_module_parity("transformer", "mha_cross", m, [&](const std::vector<Tensor>& in) {
    return both(m(in[0], in[1], in[2], {.average_attn_weights = false}));
  });
}

TEST_CASE("parity: MultiheadAttention key_padding_mask, need_weights off", "[nn][parity]") {
  nn::MultiheadAttention m(8, 2, 0.0, true, 0, 0, true);
  check_module_parity("transformer", "mha_kpm", m, [&](const std::vector<Tensor>& in) {
    auto r = m(in[0], in[0], in[0], {.key_padding_mask = in[1], .need_weights = false});
    CHECK(!r.weights.defined());
    return std::vector<Tensor>{r.output};
  });
}

TEST_CASE("parity: MultiheadAttention causal attn_mask (and is_causal)", "[nn][parity]") {
  nn::MultiheadAttention m(8, 2);
  check_module_parity("transformer", "mha_causal", m, [&](const std::vector<Tensor>& in) {
    return both(m(in[0], in[0], in[0], {.attn_mask = in[1]}));
  });
  check_module_parity("transformer", "mha_causal", m, [&](const std::vector<Tensor>& in) {
    return both(m(in[0], in[0], in[0], {.is_causal = true}));
  });
}

TEST_CASE("parity: MultiheadAttention float (B*H, L, S) mask plus key padding, shared k/v",
          "[nn][parity]") {
  nn::MultiheadAttention m(8, 4, 0.0, true, 0, 0, true);
  check_module_parity("transformer", "mha_float_mask", m, [&](const std::vector<Tensor>& in) {
    nn::MhaOptions o{.key_padding_mask = in[3], .attn_mask = in[2], .need_weights = false};
    return std::vector<Tensor>{m(in[0], in[1], in[1], o).output};
  });
}

TEST_CASE("parity: MultiheadAttention without bias, distinct q, k, v", "[nn][parity]") {
  nn::MultiheadAttention m(8, 2, 0.0, false);
  check_module_parity("transformer", "mha_nobias", m,
                      [&](const std::vector<Tensor>& in) { return both(m(in[0], in[1], in[2])); });
}

TEST_CASE("parity: TransformerEncoderLayer post-norm ReLU", "[nn][parity]") {
  nn::TransformerEncoderLayer l(8, 2, 16, 0.0);
  check_module_parity("transformer", "enc_post_relu", l,
                      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{l(in[0])}; });
}

TEST_CASE("parity: TransformerEncoderLayer norm_first GELU with key padding", "[nn][parity]") {
  nn::TransformerEncoderLayer l(8, 2, 16, 0.0, nn::FFNActivation::GELU, 1e-5, true, true);
  check_module_parity("transformer", "enc_pre_gelu", l, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{l(in[0], Tensor(), in[1])};
  });
}

TEST_CASE("parity: TransformerEncoderLayer with src_mask and src_key_padding_mask",
          "[nn][parity]") {
  nn::TransformerEncoderLayer l(8, 4, 12, 0.0);
  check_module_parity("transformer", "enc_post_kpm", l, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{l(in[0], in[2], in[1])};
  });
  check_module_parity("transformer", "enc_post_kpm", l, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{l(in[0], Tensor(), in[1], /*is_causal=*/true)};
  });
}

TEST_CASE("parity: TransformerEncoder, 2 layers and a final norm", "[nn][parity]") {
  nn::TransformerEncoder enc(
      nn::TransformerEncoderLayerOptions{
          .d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .batch_first = true},
      2, /*final_norm=*/true);
  check_module_parity("transformer", "encoder_2layer", enc, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{enc(in[0], Tensor(), in[1])};
  });
}

TEST_CASE("parity: ViT against a reference built from PyTorch modules", "[nn][parity]") {
  nn::ViT vit({.image_size = 8,
               .patch_size = 4,
               .in_channels = 3,
               .num_classes = 5,
               .dim = 8,
               .depth = 2,
               .heads = 2,
               .mlp_dim = 16});
  check_module_parity("transformer", "vit", vit, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{vit(in[0])};
  });
}

TEST_CASE("parity: position-embedding interpolation equals F.interpolate", "[nn][parity]") {
  test::check_parity("transformer", "interp_up", [](const std::vector<Tensor>& in) {
    return nn::interpolate_pos_embed(in[0], {2, 3}, {5, 4});
  });
  test::check_parity("transformer", "interp_down", [](const std::vector<Tensor>& in) {
    return nn::interpolate_pos_embed(in[0], {4, 4}, {3, 2});
  });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
