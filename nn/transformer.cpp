// Transformer encoder layers: PyTorch's (post-norm / pre-norm) and d2l's.
#include "nabla/nn/transformer.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
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
// TransformerEncoderLayer

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& o)
    : Module("TransformerEncoderLayer"), options_(o) {
  // Registration order = PyTorch's, so state_dict() lists the same keys in the same order.
  self_attn_ =
      register_module("self_attn", std::make_shared<MultiheadAttention>(
                                       o.d_model, o.nhead, o.dropout, true, 0, 0, o.batch_first));
  linear1_ = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2_ = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model));
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(o.d_model, o.layer_norm_eps));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, double dropout,
                                                 FFNActivation activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first)
    : TransformerEncoderLayer(TransformerEncoderLayerOptions{d_model, nhead, dim_feedforward,
                                                             dropout, activation, layer_norm_eps,
                                                             batch_first, norm_first}) {}

Tensor TransformerEncoderLayer::sa_block(const Tensor& x, const MhaOptions& mha) const {
  MhaOutput r = (*self_attn_)(x, x, x, mha);
  if (store_attention_) attention_weights_ = r.weights.detach();
  return (*dropout1_)(r.output);
}

Tensor TransformerEncoderLayer::ff_block(const Tensor& x) const {
  // linear1 and its activation as one fused op (the bias in the GEMM, one pass for the rest).
  const LinearActivation act =
      options_.activation == FFNActivation::GELU ? LinearActivation::GELU : LinearActivation::ReLU;
  Tensor h = (*dropout_)(linear1_->forward_activation(x, act));
  return (*dropout2_)((*linear2_)(h));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) const {
  MhaOptions mha;
  mha.attn_mask = src_mask;
  mha.key_padding_mask = src_key_padding_mask;
  mha.is_causal = is_causal;
  mha.need_weights = store_attention_;
  mha.average_attn_weights = false;
  Tensor x = src;
  if (options_.norm_first) {
    x = add(x, sa_block((*norm1_)(x), mha));
    return add(x, ff_block((*norm2_)(x)));
  }
  x = (*norm1_)(add(x, sa_block(x, mha)));
  return (*norm2_)(add(x, ff_block(x)));
}

// ----------------------------------------------------------------------------
// TransformerEncoder

TransformerEncoder::TransformerEncoder(const LayerFactory& make_layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm)
    : Module("TransformerEncoder") {
  if (num_layers < 0)
    throw ValueError(
        fmt::format("TransformerEncoder: num_layers must be >= 0, got {}", num_layers));
  layers_ = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < num_layers; ++i) {
    auto layer = make_layer();
    for (const auto& existing : *layers_)
      if (existing == layer)
        throw ValueError("TransformerEncoder: the layer factory returned the same layer twice");
    layers_->push_back(std::move(layer));
  }
  if (norm) norm_ = register_module("norm", std::move(norm));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayerOptions& layer,
                                       int64_t num_layers, bool final_norm)
    : TransformerEncoder(
          [&layer] { return std::make_shared<TransformerEncoderLayer>(layer); }, num_layers,
          final_norm ? std::make_shared<LayerNorm>(layer.d_model, layer.layer_norm_eps) : nullptr) {
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask,
                                   const Tensor& src_key_padding_mask, bool is_causal) const {
  Tensor x = src;
  for (size_t i = 0; i < layers_->size(); ++i)
    x = (*layer(i))(x, mask, src_key_padding_mask, is_causal);
  return norm_ ? (*norm_)(x) : x;
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
