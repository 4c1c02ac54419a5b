// The Transformer encoder: PyTorch's nn.TransformerEncoderLayer / nn.TransformerEncoder (same
// parameter names and computation order, post-norm and pre-norm), and d2l's building blocks
// (PositionWiseFFN, AddNorm) and full encoder (embedding * sqrt(d) + sinusoidal positions + N
// post-norm blocks with valid_lens masking).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "nabla/nn/container.h"
#include "nabla/nn/kv_cache.h"
#include "nabla/nn/layers.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/module.h"
#include "nabla/nn/multihead_attention.h"
#include "nabla/nn/positional_encoding.h"

namespace nabla::nn {

// The feed-forward activation of a Transformer layer (PyTorch's activation="relu" | "gelu";
// GELU is the exact erf form).
enum class FFNActivation { ReLU, GELU };

// relu(x) or gelu(x).
Tensor apply_activation(FFNActivation activation, const Tensor& x);

// d2l's position-wise FFN: dense2(activation(dense1(x))), applied to every position alike.
class PositionWiseFFN : public Module {
 public:
  PositionWiseFFN(int64_t d_in, int64_t d_hidden, int64_t d_out,
                  FFNActivation activation = FFNActivation::ReLU);
  Tensor forward(const Tensor& x) const;  // (..., d_in) -> (..., d_out)
  Tensor operator()(const Tensor& x) const { return call(&PositionWiseFFN::forward, x); }

 private:
  FFNActivation activation_;
  std::shared_ptr<Linear> dense1_, dense2_;
};

// d2l's residual connection + layer norm: ln(x + dropout(y)).
class AddNorm : public Module {
 public:
  AddNorm(Shape normalized_shape, double dropout);
  AddNorm(int64_t size, double dropout) : AddNorm(Shape{size}, dropout) {}
  Tensor forward(const Tensor& x, const Tensor& y) const;
  Tensor operator()(const Tensor& x, const Tensor& y) const {
    return call(&AddNorm::forward, x, y);
  }

 private:
  std::shared_ptr<Dropout> dropout_;
  std::shared_ptr<LayerNorm> ln_;
};

// The options of PyTorch's nn.TransformerEncoderLayer and nn.TransformerDecoderLayer.
struct TransformerLayerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  FFNActivation activation = FFNActivation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;  // false: no bias in the Linear, MultiheadAttention and LayerNorm layers
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;

// The masks of one encoder (layer) forward, named as in PyTorch: forward(x, {.is_causal = true}).
// Bool masks: true = not allowed; float masks are added to the attention logits.
struct EncoderForwardOptions {
  Tensor src_mask{};              // (S, S) or (B*nhead, S, S); PyTorch's `mask` for the stack
  Tensor src_key_padding_mask{};  // (B, S), or with a cache (B, all cached positions)
  bool is_causal = false;         // hide every later position (with or without src_mask)
  // Incremental decoding (nn/kv_cache.h): src holds only the new positions, which attend over
  // themselves and every earlier one cached; needs is_causal and no src_mask. One forward per
  // step; the positions' offset for a positional encoding is cache->length() before the call.
  TransformerCache* cache = nullptr;
};

// PyTorch's nn.TransformerEncoderLayer. Children: self_attn, linear1, dropout, linear2, norm1,
// norm2, dropout1, dropout2. With x = src:
//   post-norm: x = norm1(x + dropout1(SA(x)));        x = norm2(x + dropout2(FF(x)))
//   pre-norm:  x = x + dropout1(SA(norm1(x)));        x = x + dropout2(FF(norm2(x)))
//   FF(x) = linear2(dropout(activation(linear1(x))))
class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerLayerOptions& options);
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, FFNActivation activation = FFNActivation::ReLU,
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false);

  // src (S, B, E), or (B, S, E) when batch_first. With o.cache, the layer's cache is
  // o.cache->self_attn[0].
  Tensor forward(const Tensor& src, const EncoderForwardOptions& o = {}) const;
  Tensor operator()(const Tensor& src, const EncoderForwardOptions& o = {}) const {
    return call(static_cast<Forward>(&TransformerEncoderLayer::forward), src, o);
  }
  // The same with positional masks (src_mask, src_key_padding_mask, is_causal).
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false) const;
  Tensor operator()(const Tensor& src, const Tensor& src_mask,
                    const Tensor& src_key_padding_mask = {}, bool is_causal = false) const {
    return call(static_cast<ForwardPositional>(&TransformerEncoderLayer::forward), src, src_mask,
                src_key_padding_mask, is_causal);
  }
  // One layer of a cached stack: `self_attn_cache` is this layer's (o.cache is not read).
  Tensor forward_cached(const Tensor& src, const EncoderForwardOptions& o,
                        KVCache& self_attn_cache) const;
  Tensor operator()(const Tensor& src, const EncoderForwardOptions& o,
                    KVCache& self_attn_cache) const {
    return call(&TransformerEncoderLayer::forward_cached, src, o, self_attn_cache);
  }

  // When on, forward keeps the per-head attention weights (B, H, S, S), detached, for
  // inspection (attention maps); they cost nothing extra to compute.
  void set_store_attention(bool on) { store_attention_ = on; }
  const Tensor& attention_weights() const { return attention_weights_; }

  const TransformerLayerOptions& options() const { return options_; }
  const std::shared_ptr<MultiheadAttention>& self_attn() const { return self_attn_; }

 private:
  using Forward = Tensor (TransformerEncoderLayer::*)(const Tensor&,
                                                      const EncoderForwardOptions&) const;
  using ForwardPositional = Tensor (TransformerEncoderLayer::*)(const Tensor&, const Tensor&,
                                                                const Tensor&, bool) const;
  Tensor run(const Tensor& src, const EncoderForwardOptions& o, KVCache* cache) const;

  TransformerLayerOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_;
  std::shared_ptr<LayerNorm> norm1_, norm2_;
  bool store_attention_ = false;
  mutable Tensor attention_weights_;
};

// PyTorch's nn.TransformerEncoder: layers.0 ... layers.{N-1}, then the optional final norm.
// A causal pre-norm stack with a cache is a GPT-style decoder-only model.
class TransformerEncoder : public Module {
 public:
  using LayerFactory = std::function<std::shared_ptr<TransformerEncoderLayer>()>;
  // Calls make_layer num_layers times (each call must return a fresh layer).
  TransformerEncoder(const LayerFactory& make_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  // num_layers layers built from `layer`; final_norm adds LayerNorm(d_model, layer_norm_eps).
  TransformerEncoder(const TransformerLayerOptions& layer, int64_t num_layers,
                     bool final_norm = false);

  Tensor forward(const Tensor& src, const EncoderForwardOptions& o = {}) const;
  Tensor operator()(const Tensor& src, const EncoderForwardOptions& o = {}) const {
    return call(static_cast<Forward>(&TransformerEncoder::forward), src, o);
  }
  // PyTorch's positional form (mask, src_key_padding_mask, is_causal).
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false) const;
  Tensor operator()(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = {},
                    bool is_causal = false) const {
    return call(static_cast<ForwardPositional>(&TransformerEncoder::forward), src, mask,
                src_key_padding_mask, is_causal);
  }

  size_t num_layers() const { return layers_->size(); }
  std::shared_ptr<TransformerEncoderLayer> layer(size_t i) const {
    return layers_->at<TransformerEncoderLayer>(i);
  }
  const std::shared_ptr<LayerNorm>& norm() const { return norm_; }  // null without final norm

  // When on, in training mode (with grad, without a cache) every layer but the last runs through
  // nabla::checkpoint (core/grad_checkpoint.h): its activations are recomputed in backward instead
  // of kept, for about one more forward of compute; the gradients are bitwise the same. The last
  // layer's activations are the first the backward needs, so recomputing them would cost time and
  // lower no peak (torch.utils.checkpoint_sequential leaves its last segment alike).
  void set_checkpoint_layers(bool on) { checkpoint_layers_ = on; }
  bool checkpoint_layers() const { return checkpoint_layers_; }

 private:
  using Forward = Tensor (TransformerEncoder::*)(const Tensor&, const EncoderForwardOptions&) const;
  using ForwardPositional = Tensor (TransformerEncoder::*)(const Tensor&, const Tensor&,
                                                           const Tensor&, bool) const;
  Tensor run_layer(size_t i, const Tensor& x, const EncoderForwardOptions& o) const;

  std::shared_ptr<ModuleList> layers_;
  std::shared_ptr<LayerNorm> norm_;
  bool checkpoint_layers_ = false;
};

// d2l's encoder block: Y = addnorm1(X, attention(X, X, X, valid_lens)); addnorm2(Y, ffn(Y)).
// Batch-first; attention is a MultiheadAttention (use_bias as its bias).
class D2lTransformerEncoderBlock : public Module {
 public:
  D2lTransformerEncoderBlock(int64_t num_hiddens, int64_t ffn_hiddens, int64_t num_heads,
                             double dropout, bool use_bias = false);
  // x (B, T, num_hiddens), valid_lens int64 (B,) or (B, T) or undefined.
  Tensor forward(const Tensor& x, const Tensor& valid_lens = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& valid_lens = Tensor()) const {
    return call(&D2lTransformerEncoderBlock::forward, x, valid_lens);
  }
  // Per-head attention weights (B, H, T, T) of the last forward, detached.
  const Tensor& attention_weights() const { return attention_weights_; }
  const std::shared_ptr<MultiheadAttention>& attention() const { return attention_; }

 private:
  std::shared_ptr<MultiheadAttention> attention_;
  std::shared_ptr<AddNorm> addnorm1_, addnorm2_;
  std::shared_ptr<PositionWiseFFN> ffn_;
  mutable Tensor attention_weights_;
};

// d2l's Transformer encoder: X = pos_encoding(embedding(tokens) * sqrt(num_hiddens)), then the
// blocks blks.0 ... with valid_lens masking.
class D2lTransformerEncoder : public Module {
 public:
  D2lTransformerEncoder(int64_t vocab_size, int64_t num_hiddens, int64_t ffn_hiddens,
                        int64_t num_heads, int64_t num_layers, double dropout,
                        bool use_bias = false);
  // tokens int64 (B, T), valid_lens int64 (B,) or undefined -> (B, T, num_hiddens).
  Tensor forward(const Tensor& tokens, const Tensor& valid_lens = Tensor()) const;
  Tensor operator()(const Tensor& tokens, const Tensor& valid_lens = Tensor()) const {
    return call(&D2lTransformerEncoder::forward, tokens, valid_lens);
  }
  // One (B, H, T, T) tensor per block from the last forward (d2l's attention_weights).
  std::vector<Tensor> attention_weights() const;
  std::shared_ptr<D2lTransformerEncoderBlock> block(size_t i) const {
    return blks_->at<D2lTransformerEncoderBlock>(i);
  }

 private:
  int64_t num_hiddens_;
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<PositionalEncoding> pos_encoding_;
  std::shared_ptr<ModuleList> blks_;
};

}  // namespace nabla::nn
