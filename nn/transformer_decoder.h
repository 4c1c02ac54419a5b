// The Transformer decoder and the full encoder-decoder model: PyTorch's
// nn.TransformerDecoderLayer, nn.TransformerDecoder and nn.Transformer (Vaswani et al. 2017,
// "Attention Is All You Need"), with the same parameter names, options and computation order,
// plus incremental decoding through a TransformerCache (nn/kv_cache.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "nabla/nn/container.h"
#include "nabla/nn/kv_cache.h"
#include "nabla/nn/transformer.h"

namespace nabla::nn {

using TransformerDecoderLayerOptions = TransformerLayerOptions;

// The masks of one decoder (layer) forward, named as in PyTorch. T target length, S memory
// length; bool masks: true = not allowed, float masks are added to the attention logits.
struct DecoderForwardOptions {
  Tensor tgt_mask{};                 // (T, T) or (B*nhead, T, T), target self-attention
  Tensor memory_mask{};              // (T, S) or (B*nhead, T, S), cross-attention
  Tensor tgt_key_padding_mask{};     // (B, T), or with a cache (B, all cached positions)
  Tensor memory_key_padding_mask{};  // (B, S)
  bool tgt_is_causal = false;        // hide every later target position
  bool memory_is_causal = false;     // hide memory position s from target position t when s > t
  // Incremental decoding: tgt holds only the new positions; their self-attention keys/values
  // are appended to the cache, and the memory's cross-attention keys/values are computed on the
  // first step and reused (memory is not read afterwards). Needs tgt_is_causal, no tgt_mask and
  // no memory_is_causal.
  TransformerCache* cache = nullptr;
};

// PyTorch's nn.TransformerDecoderLayer. Children: self_attn, multihead_attn, linear1, dropout,
// linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3. With x = tgt, m = memory:
//   post-norm: x = norm1(x + SA(x));  x = norm2(x + CA(x, m));  x = norm3(x + FF(x))
//   pre-norm:  x = x + SA(norm1(x));  x = x + CA(norm2(x), m);  x = x + FF(norm3(x))
//   SA = dropout1(self_attn(x, x, x)), CA = dropout2(multihead_attn(x, m, m)),
//   FF = dropout3(linear2(dropout(activation(linear1(x)))))
class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerOptions& options);

  // tgt (T, B, E), memory (S, B, E); (B, T, E), (B, S, E) when batch_first. With o.cache the
  // layer's caches are o.cache->self_attn[0] and cross_attn[0].
  Tensor forward(const Tensor& tgt, const Tensor& memory,
                 const DecoderForwardOptions& o = {}) const;
  Tensor operator()(const Tensor& tgt, const Tensor& memory,
                    const DecoderForwardOptions& o = {}) const {
    return call(&TransformerDecoderLayer::forward, tgt, memory, o);
  }
  // One layer of a cached stack, with this layer's caches (o.cache is not read).
  Tensor forward_cached(const Tensor& tgt, const Tensor& memory, const DecoderForwardOptions& o,
                        KVCache& self_attn_cache, KVCache& cross_attn_cache) const;
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderForwardOptions& o,
                    KVCache& self_attn_cache, KVCache& cross_attn_cache) const {
    return call(&TransformerDecoderLayer::forward_cached, tgt, memory, o, self_attn_cache,
                cross_attn_cache);
  }

  const TransformerLayerOptions& options() const { return options_; }
  const std::shared_ptr<MultiheadAttention>& self_attn() const { return self_attn_; }
  const std::shared_ptr<MultiheadAttention>& multihead_attn() const { return multihead_attn_; }
  const std::shared_ptr<Linear>& linear1() const { return linear1_; }
  const std::shared_ptr<Linear>& linear2() const { return linear2_; }

 private:
  Tensor run(const Tensor& tgt, const Tensor& memory, const DecoderForwardOptions& o,
             KVCache* self_cache, KVCache* cross_cache) const;

  TransformerLayerOptions options_;
  std::shared_ptr<MultiheadAttention> self_attn_, multihead_attn_;
  std::shared_ptr<Linear> linear1_, linear2_;
  std::shared_ptr<Dropout> dropout_, dropout1_, dropout2_, dropout3_;
  std::shared_ptr<LayerNorm> norm1_, norm2_, norm3_;
};

// PyTorch's nn.TransformerDecoder: layers.0 ... layers.{N-1}, then the optional final norm.
class TransformerDecoder : public Module {
 public:
  using LayerFactory = std::function<std::shared_ptr<TransformerDecoderLayer>()>;
  // Calls make_layer num_layers times (each call must return a fresh layer).
  TransformerDecoder(const LayerFactory& make_layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  // num_layers layers built from `layer`; final_norm adds LayerNorm(d_model, layer_norm_eps).
  TransformerDecoder(const TransformerLayerOptions& layer, int64_t num_layers,
                     bool final_norm = false);

  Tensor forward(const Tensor& tgt, const Tensor& memory,
                 const DecoderForwardOptions& o = {}) const;
  Tensor operator()(const Tensor& tgt, const Tensor& memory,
                    const DecoderForwardOptions& o = {}) const {
    return call(&TransformerDecoder::forward, tgt, memory, o);
  }

  size_t num_layers() const { return layers_->size(); }
  std::shared_ptr<TransformerDecoderLayer> layer(size_t i) const {
    return layers_->at<TransformerDecoderLayer>(i);
  }
  const std::shared_ptr<LayerNorm>& norm() const { return norm_; }  // null without final norm

  // As TransformerEncoder's: every layer but the last runs through nabla::checkpoint in training.
  void set_checkpoint_layers(bool on) { checkpoint_layers_ = on; }
  bool checkpoint_layers() const { return checkpoint_layers_; }

 private:
  std::shared_ptr<ModuleList> layers_;
  std::shared_ptr<LayerNorm> norm_;
  bool checkpoint_layers_ = false;
};

// The options of PyTorch's nn.Transformer.
struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  FFNActivation activation = FFNActivation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

// The masks of one nn.Transformer forward (PyTorch's names).
struct TransformerForwardOptions {
  Tensor src_mask{}, tgt_mask{}, memory_mask{};
  Tensor src_key_padding_mask{}, tgt_key_padding_mask{}, memory_key_padding_mask{};
  bool src_is_causal = false, tgt_is_causal = false, memory_is_causal = false;
};

// PyTorch's nn.Transformer: encoder (TransformerEncoder with a final norm) and decoder
// (TransformerDecoder with a final norm); every parameter with more than one dim starts
// xavier_uniform_, as PyTorch's _reset_parameters. For incremental decoding run
// encoder()(src, ...) once, then decoder()(tgt_step, memory, {.tgt_is_causal = true,
// .cache = &cache}) per step.
class Transformer : public Module {
 public:
  explicit Transformer(const TransformerOptions& options = {});

  // src (S, B, E), tgt (T, B, E) (batch first: (B, S, E), (B, T, E)) -> (T, B, E).
  Tensor forward(const Tensor& src, const Tensor& tgt,
                 const TransformerForwardOptions& o = {}) const;
  Tensor operator()(const Tensor& src, const Tensor& tgt,
                    const TransformerForwardOptions& o = {}) const {
    return call(&Transformer::forward, src, tgt, o);
  }

  // PyTorch's generate_square_subsequent_mask: (size, size), -inf above the diagonal, 0 elsewhere.
  static Tensor generate_square_subsequent_mask(int64_t size, DType dtype = kFloat32);

  const TransformerOptions& options() const { return options_; }
  const std::shared_ptr<TransformerEncoder>& encoder() const { return encoder_; }
  const std::shared_ptr<TransformerDecoder>& decoder() const { return decoder_; }

 private:
  TransformerOptions options_;
  std::shared_ptr<TransformerEncoder> encoder_;
  std::shared_ptr<TransformerDecoder> decoder_;
};

}  // namespace nabla::nn
