// Transformer encoder layers: PyTorch's (post-norm / pre-norm) and d2l's.
#include "nabla/nn/transformer.h"

#include "nabla/nn/transformer_blocks.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
#include "nabla/core/grad_checkpoint.h"
#include "nabla/ops/activation.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/unary.h"

namespace nabla::nn {

Tensor apply_activation(FFNActivation activation, const Tensor& x) {
  return activation == FFNActivation::GELU ? gelu(x) : relu(x);
}

// ----------------------------------------------------------------------------
// d2l blocks

PositionWiseFFN::PositionWiseFFN(int64_t d_in, int64_t d_hidden, int64_t d_out,
                                 FFNActivation activation)
    : Module("PositionWiseFFN"), activation_(activation) {
  dense1_ = register_module("dense1", std::make_shared<Linear>(d_in, d_hidden));
  dense2_ = register_module("dense2", std::make_shared<Linear>(d_hidden, d_out));
}

Tensor PositionWiseFFN::forward(const Tensor& x) const {
  return (*dense2_)(apply_activation(activation_, (*dense1_)(x)));
}

AddNorm::AddNorm(Shape normalized_shape, double dropout) : Module("AddNorm") {
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout));
  ln_ = register_module("ln", std::make_shared<LayerNorm>(std::move(normalized_shape)));
}

Tensor AddNorm::forward(const Tensor& x, const Tensor& y) const {
  if (x.shape() != y.shape())
    throw ShapeError(fmt::format("AddNorm: x {} and y {} must have the same shape",
                                 shape_str(x.shape()), shape_str(y.shape())));
  return (*ln_)(add(x, (*dropout_)(y)));
}

// ----------------------------------------------------------------------------
// Pieces shared with the decoder (nn/transformer_blocks.h)

namespace transformer_detail {

Tensor feed_forward(const Linear& linear1, const Dropout& dropout, const Linear& linear2,
                    FFNActivation activation, const Tensor& x) {
  const LinearActivation act =
      activation == FFNActivation::GELU ? LinearActivation::GELU : LinearActivation::ReLU;
  return linear2(dropout(linear1.forward_activation(x, act)));
}

void check_layer_options(const char* who, const TransformerLayerOptions& o) {
  if (o.d_model <= 0 || o.nhead <= 0 || o.dim_feedforward <= 0 || o.d_model % o.nhead != 0)
    throw ValueError(fmt::format(
        "{}: d_model ({}), nhead ({}) and dim_feedforward ({}) must be positive and d_model "
        "divisible by nhead",
        who, o.d_model, o.nhead, o.dim_feedforward));
}

void check_cached_self_attention(const char* who, bool is_causal, const char* causal_name,
                                 const Tensor& mask, const char* mask_name) {
  if (!is_causal || mask.defined())
    throw ValueError(fmt::format(
        "{}: a cache holds only earlier positions, so self-attention must be causal: set {} "
        "and leave {} undefined (got {} = {}, {} {})",
        who, causal_name, mask_name, causal_name, is_causal, mask_name,
        mask.defined() ? shape_str(mask.shape()) : "undefined"));
}

}  // namespace transformer_detail

using transformer_detail::feed_forward;
using transformer_detail::sublayer;

// ----------------------------------------------------------------------------
// TransformerEncoderLayer

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& o)
    : Module("TransformerEncoderLayer"), options_(o) {
  transformer_detail::check_layer_options("TransformerEncoderLayer", o);
  // Registration order = PyTorch's, so state_dict() lists the same keys in the same order.
  self_attn_ =
      register_module("self_attn", std::make_shared<MultiheadAttention>(
                                       o.d_model, o.nhead, o.dropout, o.bias, 0, 0, o.batch_first));
  linear1_ =
      register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward, o.bias));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2_ =
      register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model, o.bias));
  auto norm = [&] {
    return std::make_shared<LayerNorm>(o.d_model,
                                       LayerNormOptions{.eps = o.layer_norm_eps, .bias = o.bias});
  };
  norm1_ = register_module("norm1", norm());
  norm2_ = register_module("norm2", norm());
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double dropout,
                                                 FFNActivation activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first)
    : TransformerEncoderLayer(TransformerLayerOptions{d_model, nhead, dim_feedforward, dropout,
                                                      activation, layer_norm_eps, batch_first,
                                                      norm_first}) {}

Tensor TransformerEncoderLayer::run(const Tensor& src, const EncoderForwardOptions& o,
                                    KVCache* cache) const {
  if (cache)
    transformer_detail::check_cached_self_attention("TransformerEncoderLayer", o.is_causal,
                                                    "is_causal", o.src_mask, "src_mask");
  const MhaOptions mha{.key_padding_mask = o.src_key_padding_mask,
                       .attn_mask = o.src_mask,
                       .is_causal = o.is_causal,
                       .need_weights = store_attention_,
                       .average_attn_weights = false,
                       .kv_cache = cache};
  auto self_attention = [&](const Tensor& x) {
    MhaOutput r = (*self_attn_)(x, x, x, mha);
    if (store_attention_) attention_weights_ = r.weights.detach();
    return (*dropout1_)(r.output);
  };
  auto ff = [&](const Tensor& x) {
    return (*dropout2_)(feed_forward(*linear1_, *dropout_, *linear2_, options_.activation, x));
  };
  const Tensor x = sublayer(options_.norm_first, *norm1_, src, self_attention);
  return sublayer(options_.norm_first, *norm2_, x, ff);
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const EncoderForwardOptions& o) const {
  if (!o.cache) return run(src, o, nullptr);
  o.cache->prepare(1, false, "TransformerEncoderLayer");
  return run(src, o, &o.cache->self_attn[0]);
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) const {
  return run(
      src,
      {.src_mask = src_mask, .src_key_padding_mask = src_key_padding_mask, .is_causal = is_causal},
      nullptr);
}

Tensor TransformerEncoderLayer::forward_cached(const Tensor& src, const EncoderForwardOptions& o,
                                               KVCache& self_attn_cache) const {
  return run(src, o, &self_attn_cache);
}

// ----------------------------------------------------------------------------
// TransformerEncoder

TransformerEncoder::TransformerEncoder(const LayerFactory& make_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : Module("TransformerEncoder") {
  layers_ = register_module("layers", std::make_shared<ModuleList>());
  transformer_detail::build_layers("TransformerEncoder", *layers_, make_layer, num_layers);
  if (norm) norm_ = register_module("norm", std::move(norm));
}

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers,
                                       bool final_norm)
    : TransformerEncoder(
          [&layer] { return std::make_shared<TransformerEncoderLayer>(layer); }, num_layers,
          final_norm ? std::make_shared<LayerNorm>(
                           layer.d_model,
                           LayerNormOptions{.eps = layer.layer_norm_eps, .bias = layer.bias})
                     : nullptr) {}

Tensor TransformerEncoder::forward(const Tensor& src, const EncoderForwardOptions& o) const {
  Tensor x = src;
  if (o.cache) {
    transformer_detail::check_cached_self_attention("TransformerEncoder", o.is_causal, "is_causal",
                                                    o.src_mask, "src_mask");
    o.cache->prepare(layers_->size(), false, "TransformerEncoder");
    for (size_t i = 0; i < layers_->size(); ++i) x = (*layer(i))(x, o, o.cache->self_attn[i]);
  } else {
    for (size_t i = 0; i < layers_->size(); ++i) x = run_layer(i, x, o);
  }
  return norm_ ? (*norm_)(x) : x;
}

Tensor TransformerEncoder::run_layer(size_t i, const Tensor& x,
                                     const EncoderForwardOptions& o) const {
  std::shared_ptr<TransformerEncoderLayer> l = layer(i);
  if (!checkpoint_layers_ || !is_training() || i + 1 == layers_->size()) return (*l)(x, o);
  // By value: the recompute in backward runs after this forward has returned.
  return checkpoint([l, o](const Tensor& in) { return (*l)(in, o); }, x);
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask,
                                   const Tensor& src_key_padding_mask, bool is_causal) const {
  return forward(src, EncoderForwardOptions{.src_mask = mask,
                                            .src_key_padding_mask = src_key_padding_mask,
                                            .is_causal = is_causal});
}

// ----------------------------------------------------------------------------
// d2l's encoder

D2lTransformerEncoderBlock::D2lTransformerEncoderBlock(int64_t num_hiddens, int64_t ffn_hiddens,
                                                       int64_t num_heads, double dropout,
                                                       bool use_bias)
    : Module("D2lTransformerEncoderBlock") {
  attention_ = register_module(
      "attention", std::make_shared<MultiheadAttention>(num_hiddens, num_heads, dropout, use_bias,
                                                        0, 0, /*batch_first=*/true));
  addnorm1_ = register_module("addnorm1", std::make_shared<AddNorm>(num_hiddens, dropout));
  ffn_ = register_module("ffn",
                         std::make_shared<PositionWiseFFN>(num_hiddens, ffn_hiddens, num_hiddens));
  addnorm2_ = register_module("addnorm2", std::make_shared<AddNorm>(num_hiddens, dropout));
}

Tensor D2lTransformerEncoderBlock::forward(const Tensor& x, const Tensor& valid_lens) const {
  MhaOptions mha;
  mha.valid_lens = valid_lens;
  mha.average_attn_weights = false;
  MhaOutput r = (*attention_)(x, x, x, mha);
  attention_weights_ = r.weights.detach();
  Tensor y = (*addnorm1_)(x, r.output);
  return (*addnorm2_)(y, (*ffn_)(y));
}

D2lTransformerEncoder::D2lTransformerEncoder(int64_t vocab_size, int64_t num_hiddens,
                                             int64_t ffn_hiddens, int64_t num_heads,
                                             int64_t num_layers, double dropout, bool use_bias)
    : Module("D2lTransformerEncoder"), num_hiddens_(num_hiddens) {
  embedding_ = register_module("embedding", std::make_shared<Embedding>(vocab_size, num_hiddens));
  pos_encoding_ =
      register_module("pos_encoding", std::make_shared<PositionalEncoding>(num_hiddens, dropout));
  blks_ = register_module("blks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i)
    blks_->push_back(std::make_shared<D2lTransformerEncoderBlock>(num_hiddens, ffn_hiddens,
                                                                  num_heads, dropout, use_bias));
}

Tensor D2lTransformerEncoder::forward(const Tensor& tokens, const Tensor& valid_lens) const {
  // The embedding is scaled up by sqrt(d) so it is not drowned by the positions in [-1, 1].
  Tensor x =
      (*pos_encoding_)(mul((*embedding_)(tokens), std::sqrt(static_cast<double>(num_hiddens_))));
  for (size_t i = 0; i < blks_->size(); ++i) x = (*block(i))(x, valid_lens);
  return x;
}

std::vector<Tensor> D2lTransformerEncoder::attention_weights() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < blks_->size(); ++i) out.push_back(block(i)->attention_weights());
  return out;
}

}  // namespace nabla::nn
