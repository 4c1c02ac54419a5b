// The model of cross_modal_attention: a question queries a scene through cross-attention.
//
//   scene (B, 1, 56, 56) -> 7x7 patches -> linear embedding + learned positions
//        -> pre-norm Transformer encoder (ViT, Dosovitskiy et al. 2020), its self-attention
//           within 28x28-pixel windows (--window; Swin's partition, Liu et al. 2021): one item
//           per window                                                  image (B, S, d)
//   question tokens -> embedding + learned positions -> pre-norm encoder   text (B*Q, T, d)
//
// The windows keep each patch's features about its own item: relating items (which one is the
// sandal asked about?) is left to the cross-attention. Over the whole scene (--window 0) every
// patch can summarise all four items, and "where" questions were answered through near-uniform
// cross-attention (0.31 of it on the named item's quadrant after 10 epochs); with the
// windows, a short run (939 steps) reached where/what accuracy 0.86/0.82 against 0.53/0.74.
//
//   --direction text2image (default): each question token is a query, the image patches are the
//     keys and values (Vaswani et al. 2017, section 3.2.3, "encoder-decoder attention"; the
//     co-attention of ViLBERT, Lu et al. 2019, and LXMERT, Tan and Bansal 2019, runs it both ways),
//     then the question's tokens are averaged.
//   --direction image2text: each patch is a query over the question's tokens, then the patches are
//     pooled by attention whose query is the question (the mean of its encoded tokens).
//
//   -> LayerNorm -> Linear over the 14 answers (4 positions + 10 classes) -> logits (B, Q, 14)
//
// The attention that reads the image (text2image: the cross-attention; image2text: the pooling)
// is what attention_on_target measures: its weight on the patches of the quadrant the question is
// about.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nabla/nabla.h"

namespace nabla::examples::crossmodal {

enum class Direction { kTextToImage, kImageToText };
const char* direction_name(Direction d);  // "text2image", "image2text"

struct ModelConfig {
  Direction direction = Direction::kTextToImage;
  int64_t dim = 64, heads = 4, ffn = 128;
  int64_t image_layers = 4, text_layers = 1, cross_layers = 1;
  int64_t patch = 7;  // divides 28, so every patch lies in one item
  // Image self-attention within windows of window x window pixels (a multiple of patch dividing
  // 56); 0 or 56: over the whole scene. 28: one item per window (see model.cpp).
  int64_t window = 28;
  double dropout = 0.0;
};

// A pre-norm cross-attention block: x = x + MHA(LN(x), context, context); x = x + FFN(LN(x)).
// The context comes final-normed from its encoder.
class CrossAttentionBlock : public nn::Module {
 public:
  CrossAttentionBlock(int64_t dim, int64_t heads, int64_t ffn, double dropout);
  // x (B, L, d) queries; context (B, S, d) keys and values; context_padding (B, S) bool, true
  // at padding, or undefined -> (B, L, d).
  Tensor forward(const Tensor& x, const Tensor& context, const Tensor& context_padding) const;
  Tensor operator()(const Tensor& x, const Tensor& context, const Tensor& context_padding) const {
    return call(&CrossAttentionBlock::forward, x, context, context_padding);
  }
  // When on, forward keeps the per-head weights (B, H, L, S), detached.
  void set_store_attention(bool on) { store_ = on; }
  const Tensor& attention_weights() const { return weights_; }

 private:
  std::shared_ptr<nn::LayerNorm> norm1_, norm2_;
  std::shared_ptr<nn::MultiheadAttention> attn_;
  std::shared_ptr<nn::Linear> linear1_, linear2_;
  std::shared_ptr<nn::Dropout> dropout_;
  bool store_ = false;
  mutable Tensor weights_;
};

class CrossModalModel : public nn::Module {
 public:
  explicit CrossModalModel(const ModelConfig& c);

  // images (B, 1, 56, 56); questions (B, Q, T) int64 word ids padded with kPadToken, T at most
  // kMaxQuestionTokens -> logits (B, Q, kAnswers).
  Tensor forward(const Tensor& images, const Tensor& questions) const;
  Tensor operator()(const Tensor& images, const Tensor& questions) const {
    return call(&CrossModalModel::forward, images, questions);
  }

  // When on, forward keeps each question's attention over the patches: (B, Q, S), S = grid^2
  // patches in row-major order, each row a distribution (averaged over heads, the question's
  // tokens and the cross layers for text2image; over heads for image2text's pooling).
  void set_store_attention(bool on);
  const Tensor& patch_attention() const { return patch_attention_; }

  // images (B, 1, 56, 56) -> the encoded patches (B, S, d), row-major (the keys and values of
  // text2image's cross-attention). With --window, a patch sees only its own window's patches.
  Tensor image_features(const Tensor& images) const;

  const ModelConfig& config() const { return config_; }
  int64_t grid() const { return grid_; }  // patches per side
  // The architecture as numbers, also the persistent buffer "config": a checkpoint of another
  // configuration is recognised before its tensors are read.
  std::vector<int64_t> signature() const;

 private:
  Tensor text_features(const Tensor& tokens, const Tensor& padding) const;

  ModelConfig config_;
  int64_t grid_;
  std::shared_ptr<nn::PatchEmbedding> patch_embed_;
  Tensor image_pos_, text_pos_;
  std::shared_ptr<nn::TransformerEncoder> image_encoder_, text_encoder_;
  std::shared_ptr<nn::Embedding> token_embed_;
  std::shared_ptr<nn::ModuleList> cross_;
  std::shared_ptr<nn::MultiheadAttention> pool_;  // image2text only
  std::shared_ptr<nn::LayerNorm> pool_norm_, head_norm_;
  std::shared_ptr<nn::Linear> head_;
  bool store_ = false;
  mutable Tensor patch_attention_;
};

// weights (B, H, L, S), query_padding (B, L) bool (true at padding) or undefined -> (B, S): the
// mean over heads and the non-padding queries. Every row of the result sums to 1 when the
// weights' rows do.
Tensor mean_attention(const Tensor& weights, const Tensor& query_padding);

// maps (N, S): attention over grid x grid patches (row-major); quadrant (N) in [0, 4) -> each
// map's weight on its quadrant's patches. Throws ShapeError / IndexError on a mismatch.
std::vector<double> attention_on_quadrant(const Tensor& maps, const std::vector<int64_t>& quadrant,
                                          int64_t grid);

// The "model" section of a checkpoint holds a "config" other than this model's: a ValueError
// naming the flags that differ (--direction first). Nothing when the file does not exist.
void check_checkpoint_config(const std::string& path, const CrossModalModel& model);

}  // namespace nabla::examples::crossmodal
