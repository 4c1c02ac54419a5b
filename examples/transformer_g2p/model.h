// The grapheme-to-phoneme Transformer of transformer_g2p and its cached decoding.
//
//   letters <eos> -> Embedding * sqrt(d) + sinusoidal positions -> nn::Transformer encoder
//   <bos> phonemes -> Embedding * sqrt(d) + sinusoidal positions -> decoder (causal self-attention,
//   cross-attention to the letters) -> Linear -> next-phoneme logits
//
// Pre-norm layers (norm_first; nn::Transformer adds the final norms): they train without the
// long warm-up post-norm needs (Xiong et al. 2020, "On Layer Normalization in the Transformer
// Architecture"), which matters in a run of a few thousand steps.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nabla/nabla.h"

namespace nabla::examples::g2p {

struct ModelConfig {
  int64_t src_vocab = 0, tgt_vocab = 0;
  int64_t d_model = 128, heads = 4, encoder_layers = 3, decoder_layers = 3, ffn = 512;
  double dropout = 0.1;
  int64_t max_len = 64;  // positions of the sinusoidal table (words are at most 21 tokens)
};

class G2pTransformer : public nn::Module {
 public:
  explicit G2pTransformer(const ModelConfig& c);

  // src (B, S) int64 letters <eos> padded with PAD; src_padding (B, S) bool, true at padding
  // -> memory (B, S, d).
  Tensor encode(const Tensor& src, const Tensor& src_padding) const;
  // tgt (B, T) int64 decoder input starting at position `offset` (a cache's length) -> logits
  // (B, T, V). Without a cache, tgt is the whole prefix (teacher forcing).
  Tensor decode(const Tensor& tgt, int64_t offset, const Tensor& memory, const Tensor& src_padding,
                nn::TransformerCache* cache = nullptr) const;
  // Teacher forcing: logits (B, T, V) of every next phoneme.
  Tensor forward(const Tensor& src, const Tensor& src_padding, const Tensor& tgt_in) const {
    return decode(tgt_in, 0, encode(src, src_padding), src_padding);
  }

  const ModelConfig& config() const { return config_; }
  const nn::Transformer& transformer() const { return *transformer_; }
  // The architecture numbers, also stored as the persistent buffer "config" so that a
  // checkpoint of another configuration is recognised before its tensors are read.
  std::vector<int64_t> signature() const;

 private:
  Tensor embed(const nn::Embedding& table, const Tensor& tokens, int64_t offset) const;

  ModelConfig config_;
  std::shared_ptr<nn::Embedding> src_embed_, tgt_embed_;
  std::shared_ptr<nn::Dropout> embed_dropout_;
  std::shared_ptr<nn::Transformer> transformer_;
  std::shared_ptr<nn::Linear> generator_;
  Tensor positions_;  // (max_len, d), non-persistent
};

// nn::NextToken over a batch of encoded words: the decoder's KV cache (self-attention keys and
// values appended per step, the memory's cross-attention keys and values computed on the first
// step) makes a step O(t). Beam search's reorder moves the cache, memory and padding mask rows.
class CachedDecoder final : public nn::NextToken {
 public:
  CachedDecoder(const G2pTransformer& model, Tensor memory, Tensor src_padding, int64_t max_len);
  int64_t vocab_size() const override { return model_.config().tgt_vocab; }
  Tensor logits(const Tensor& new_tokens) override;
  void reorder(const Tensor& batch_index) override;
  void reset() override;

 private:
  const G2pTransformer& model_;
  Tensor memory0_, padding0_, memory_, padding_;
  nn::TransformerCache cache_;
};

// A checkpoint's "model.config" buffer compared with this model's: a ValueError naming both
// configurations when they differ (nothing when the file does not exist).
void check_checkpoint_config(const std::string& path, const G2pTransformer& model);

}  // namespace nabla::examples::g2p
