// Transformer decoder layers and stack, and nn::Transformer (PyTorch's computation order).
#include "nabla/nn/transformer_decoder.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/grad_checkpoint.h"
#include "nabla/nn/init.h"
#include "nabla/nn/transformer_blocks.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/pointwise.h"

namespace nabla::nn {

using transformer_detail::feed_forward;
using transformer_detail::sublayer;

// ----------------------------------------------------------------------------
// TransformerDecoderLayer

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& o)
    : Module("TransformerDecoderLayer"), options_(o) {
  transformer_detail::check_layer_options("TransformerDecoderLayer", o);
  auto attention = [&] {
    return std::make_shared<MultiheadAttention>(o.d_model, o.nhead, o.dropout, o.bias, 0, 0,
                                                o.batch_first);
  };
  auto norm = [&] {
    return std::make_shared<LayerNorm>(o.d_model,
                                       LayerNormOptions{.eps = o.layer_norm_eps, .bias = o.bias});
  };
  // Registration order = PyTorch's, so state_dict() lists the same keys in the same order.
  self_attn_ = register_module("self_attn", attention());
  multihead_attn_ = register_module("multihead_attn", attention());
  linear1_ =
      register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2_ =
      register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  norm1_ = register_module("norm1", norm());
  norm2_ = register_module("norm2", norm());
  norm3_ = register_module("norm3", norm());
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3_ = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerDecoderLayer::run(const Tensor& tgt, const Tensor& memory,
                                    const DecoderForwardOptions& o, KVCache* self_cache,
                                    KVCache* cross_cache) const {
  if (self_cache) {
    transformer_detail::check_cached_self_attention("TransformerDecoderLayer", o.tgt_is_causal,
                                                    "tgt_is_causal", o.tgt_mask, "tgt_mask");
    if (o.memory_is_causal)
      throw ValueError("TransformerDecoderLayer: memory_is_causal is not supported with a cache");
  }
  if (!memory.defined() && !(cross_cache && !cross_cache->empty()))
    throw ValueError(
        "TransformerDecoderLayer: memory is undefined (only a cache's later steps may leave it "
        "out, its keys and values being cached)");
  // need_weights = false: the fused attention kernel, as PyTorch's _sa_block / _mha_block.
  const MhaOptions self_options{.key_padding_mask = o.tgt_key_padding_mask,
                                .attn_mask = o.tgt_mask,
                                .is_causal = o.tgt_is_causal,
                                .need_weights = false,
                                .kv_cache = self_cache};
  const MhaOptions cross_options{.key_padding_mask = o.memory_key_padding_mask,
                                 .attn_mask = o.memory_mask,
                                 .is_causal = o.memory_is_causal,
                                 .need_weights = false,
                                 .kv_cache = cross_cache};
  auto self_attention = [&](const Tensor& x) {
    return (*dropout1_)((*self_attn_)(x, x, x, self_options).output);
  };
  auto cross_attention = [&](const Tensor& x) {
    return (*dropout2_)((*multihead_attn_)(x, memory, memory, cross_options).output);
  };
  auto ff = [&](const Tensor& x) {
    return (*dropout3_)(feed_forward(*linear1_, *dropout_, *linear2_, options_.activation, x));
  };
  const bool pre = options_.norm_first;
  Tensor x = sublayer(pre, *norm1_, tgt, self_attention);
  x = sublayer(pre, *norm2_, x, cross_attention);
  return sublayer(pre, *norm3_, x, ff);
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const DecoderForwardOptions& o) const {
  if (!o.cache) return run(tgt, memory, o, nullptr, nullptr);
  o.cache->prepare(1, /*cross=*/true, "TransformerDecoderLayer");
  return run(tgt, memory, o, &o.cache->self_attn[0], &o.cache->cross_attn[0]);
}

Tensor TransformerDecoderLayer::forward_cached(const Tensor& tgt, const Tensor& memory,
                                               const DecoderForwardOptions& o,
                                               KVCache& self_attn_cache,
                                               KVCache& cross_attn_cache) const {
  return run(tgt, memory, o, &self_attn_cache, &cross_attn_cache);
}

// ----------------------------------------------------------------------------
// TransformerDecoder

TransformerDecoder::TransformerDecoder(const LayerFactory& make_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : Module("TransformerDecoder") {
  layers_ = register_module("layers", std::make_shared<ModuleList>());
  transformer_detail::build_layers("TransformerDecoder", *layers_, make_layer, num_layers);
  if (norm) norm_ = register_module("norm", std::move(norm));
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers,
                                       bool final_norm)
    : TransformerDecoder(
          [&layer] { return std::make_shared<TransformerDecoderLayer>(layer); }, num_layers,
          final_norm ? std::make_shared<LayerNorm>(
                           layer.d_model,
                           LayerNormOptions{.eps = layer.layer_norm_eps, .bias = layer.bias})
                     : nullptr) {}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory,
                                   const DecoderForwardOptions& o) const {
  Tensor x = tgt;
  if (o.cache) {
    o.cache->prepare(layers_->size(), /*cross=*/true, "TransformerDecoder");
    for (size_t i = 0; i < layers_->size(); ++i)
      x = (*layer(i))(x, memory, o, o.cache->self_attn[i], o.cache->cross_attn[i]);
  } else {
    for (size_t i = 0; i < layers_->size(); ++i) {
      std::shared_ptr<TransformerDecoderLayer> l = layer(i);
      if (checkpoint_layers_ && is_training() && i + 1 < layers_->size()) {
        // o by value: the backward recomputes the layer after this forward returned.
        x = checkpoint([l, o](const Tensor& t, const Tensor& m) { return (*l)(t, m, o); }, x,
                       memory);
      } else {
        x = (*l)(x, memory, o);
      }
    }
  }
  return norm_ ? (*norm_)(x) : x;
}

// ----------------------------------------------------------------------------
// Transformer

Transformer::Transformer(const TransformerOptions& o) : Module("Transformer"), options_(o) {
  const TransformerLayerOptions layer{.d_model = o.d_model,
                                      .nhead = o.nhead,
                                      .dim_feedforward = o.dim_feedforward,
                                      .dropout = o.dropout,
                                      .activation = o.activation,
                                      .layer_norm_eps = o.layer_norm_eps,
                                      .batch_first = o.batch_first,
                                      .norm_first = o.norm_first,
                                      .bias = o.bias};
  encoder_ = register_module(
      "encoder", std::make_shared<TransformerEncoder>(layer, o.num_encoder_layers, true));
  decoder_ = register_module(
      "decoder", std::make_shared<TransformerDecoder>(layer, o.num_decoder_layers, true));
  // PyTorch's _reset_parameters: Glorot-uniform for every matrix.
  for (const Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt,
                            const TransformerForwardOptions& o) const {
  if (!src.defined() || !tgt.defined() || src.dim() != tgt.dim() ||
      (src.dim() != 2 && src.dim() != 3) || src.size(-1) != options_.d_model ||
      tgt.size(-1) != options_.d_model ||
      (src.dim() == 3 &&
       src.size(options_.batch_first ? 0 : 1) != tgt.size(options_.batch_first ? 0 : 1)))
    throw ShapeError(fmt::format(
        "Transformer: src and tgt must be both {} or both (length, {}) with one batch size, got "
        "src {} and tgt {}",
        options_.batch_first ? fmt::format("(batch, length, {})", options_.d_model)
                             : fmt::format("(length, batch, {})", options_.d_model),
        options_.d_model, src.defined() ? shape_str(src.shape()) : "undefined",
        tgt.defined() ? shape_str(tgt.shape()) : "undefined"));
  const Tensor memory = (*encoder_)(src, {.src_mask = o.src_mask,
                                          .src_key_padding_mask = o.src_key_padding_mask,
                                          .is_causal = o.src_is_causal});
  return (*decoder_)(tgt, memory,
                     {.tgt_mask = o.tgt_mask,
                      .memory_mask = o.memory_mask,
                      .tgt_key_padding_mask = o.tgt_key_padding_mask,
                      .memory_key_padding_mask = o.memory_key_padding_mask,
                      .tgt_is_causal = o.tgt_is_causal,
                      .memory_is_causal = o.memory_is_causal});
}

Tensor Transformer::generate_square_subsequent_mask(int64_t size, DType dtype) {
  if (size < 0)
    throw ValueError(fmt::format(
        "Transformer::generate_square_subsequent_mask: size must be >= 0, got {}", size));
  const Tensor later = gt(arange(size).view({1, size}), arange(size).view({size, 1}));
  return masked_fill(zeros({size, size}, dtype), later, kNegInf<double>);
}

}  // namespace nabla::nn
