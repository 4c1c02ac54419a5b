// Vision Transformer (Dosovitskiy et al. 2020): the image is cut into p x p patches, each patch
// is embedded linearly (= Conv2d with kernel = stride = p), a learned CLS token is prepended,
// learned position embeddings are added, pre-norm Transformer blocks run, and a linear head
// classifies the final-normed CLS token. Also: position-embedding interpolation for another
// image size (bilinear, as timm/DeiT do when fine-tuning at a higher resolution).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "nabla/nn/container.h"
#include "nabla/nn/layers.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/module.h"
#include "nabla/nn/transformer.h"

namespace nabla::nn {

// Bilinear resize of a (gh, gw, D) grid to (new_h, new_w, D), the same values as
// F.interpolate(mode="bilinear", align_corners=False) on the (1, D, gh, gw) image. Written as two
// matmuls with fixed interpolation matrices, so gradients of any order flow to `grid`.
Tensor bilinear_resize_grid(const Tensor& grid, int64_t new_h, int64_t new_w);

// pos_embed (1, prefix + gh*gw, D) -> (1, prefix + nh*nw, D): the first `num_prefix_tokens` rows
// (the CLS token's) are kept, the patch-grid part is resized bilinearly. Differentiable.
Tensor interpolate_pos_embed(const Tensor& pos_embed, std::array<int64_t, 2> old_grid,
                             std::array<int64_t, 2> new_grid, int64_t num_prefix_tokens = 1);

// The parameters of Conv2d(in_channels, dim, kernel = stride = patch): weight (dim, C, p, p) and
// bias (dim), named and initialised like PyTorch's Conv2d, so conv weights load directly.
class PatchProjection : public Module {
 public:
  PatchProjection(int64_t in_channels, int64_t dim, int64_t patch);
  // patches (B, N, C*p*p) -> (B, N, dim): one GEMM with the weight viewed as (dim, C*p*p).
  Tensor forward(const Tensor& patches) const;
  Tensor operator()(const Tensor& patches) const {
    return call(&PatchProjection::forward, patches);
  }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
};

// images (B, C, H, W) -> (B, (H/p)*(W/p), dim): patchify then the projection "proj".
class PatchEmbedding : public Module {
 public:
  PatchEmbedding(int64_t in_channels, int64_t dim, int64_t patch);
  Tensor forward(const Tensor& images) const;
  Tensor operator()(const Tensor& images) const { return call(&PatchEmbedding::forward, images); }
  const std::shared_ptr<PatchProjection>& proj() const { return proj_; }
  int64_t patch_size() const { return patch_; }

 private:
  int64_t in_channels_, patch_;
  std::shared_ptr<PatchProjection> proj_;
};

struct ViTConfig {
  int64_t image_size = 32;  // square images of image_size x image_size pixels
  int64_t patch_size = 4;
  int64_t in_channels = 3;
  int64_t num_classes = 10;
  int64_t dim = 64;  // token width
  int64_t depth = 6;
  int64_t heads = 4;
  int64_t mlp_dim = 128;     // hidden width of each block's feed-forward network
  double dropout = 0.0;      // inside the blocks (attention weights, FFN, residual branches)
  double emb_dropout = 0.0;  // on the embedded tokens
  double layer_norm_eps = 1e-5;
};

// Parameters (state_dict order): cls_token (1, 1, dim), pos_embed (1, N+1, dim),
// patch_embed.proj.{weight,bias}, blocks.i.* (TransformerEncoderLayer, norm_first, GELU,
// batch_first), norm.*, head.*.
class ViT : public Module {
 public:
  explicit ViT(const ViTConfig& config);

  // images (B, C, H, W) with (H/p, W/p) equal to grid() -> logits (B, num_classes).
  Tensor forward(const Tensor& images) const;
  Tensor operator()(const Tensor& images) const { return call(&ViT::forward, images); }
  // The final-normed tokens (B, N+1, dim) (CLS first) that the head reads token 0 of.
  Tensor features(const Tensor& images) const;

  // Resizes pos_embed in place (the parameter keeps its handle, like PyTorch's `param.data =`)
  // for images of (new_grid[0] * p, new_grid[1] * p) pixels. Call it before building an
  // optimizer: optimizer state shaped like the old pos_embed does not fit the new one.
  void interpolate_pos_embed(std::array<int64_t, 2> new_grid);
  std::array<int64_t, 2> grid() const { return grid_; }  // (gh, gw) patches per column, row

  // When on, every block keeps its per-head attention weights (B, H, N+1, N+1) from the last
  // forward; attention_maps() returns them, one per block (detached).
  void set_store_attention(bool on);
  std::vector<Tensor> attention_maps() const;
  // The last block's attention from the CLS token to every patch, (B, H, gh, gw).
  Tensor cls_attention_map() const;

  // As TransformerEncoder::set_checkpoint_layers: in training mode with grad, every block but the
  // last runs through nabla::checkpoint (recomputed in backward; bitwise the same gradients).
  void set_checkpoint_layers(bool on) { checkpoint_layers_ = on; }
  bool checkpoint_layers() const { return checkpoint_layers_; }

  const ViTConfig& config() const { return config_; }
  const Tensor& cls_token() const { return cls_token_; }
  const Tensor& pos_embed() const { return pos_embed_; }
  std::shared_ptr<TransformerEncoderLayer> block(size_t i) const {
    return blocks_->at<TransformerEncoderLayer>(i);
  }

 private:
  ViTConfig config_;
  std::array<int64_t, 2> grid_;
  Tensor cls_token_, pos_embed_;
  std::shared_ptr<PatchEmbedding> patch_embed_;
  std::shared_ptr<Dropout> pos_drop_;
  std::shared_ptr<ModuleList> blocks_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Linear> head_;
  bool checkpoint_layers_ = false;
};

}  // namespace nabla::nn
