// Vision Transformer: patch embedding, CLS token, learned positions, pre-norm blocks, head; and
// bilinear position-embedding interpolation.
#include "nabla/nn/vit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/grad_checkpoint.h"
#include "nabla/nn/init.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/patches.h"
#include "nabla/ops/shape.h"

namespace nabla::nn {
namespace {

// R (out, in) with out_vec = R @ in_vec the 1-D linear interpolation of PyTorch's
// align_corners=False: source coordinate (i + 0.5) * in / out - 0.5, clamped below at 0.
Tensor interpolation_matrix(int64_t in, int64_t out, DType dt) {
  std::vector<double> r(static_cast<size_t>(out * in), 0.0);
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t i = 0; i < out; ++i) {
    const double src = std::max((static_cast<double>(i) + 0.5) * scale - 0.5, 0.0);
    const auto i0 = static_cast<int64_t>(std::floor(src));
    const int64_t i1 = std::min(i0 + 1, in - 1);
    const double w1 = src - static_cast<double>(i0);
    r[static_cast<size_t>(i * in + i0)] += 1.0 - w1;
    r[static_cast<size_t>(i * in + i1)] += w1;
  }
  return from_vector(r, {out, in}).to(dt);
}

}  // namespace

// ----------------------------------------------------------------------------
// position-embedding interpolation
//   out[i, j, :] = sum_{a, b} Rh[i, a] Rw[j, b] grid[a, b, :]
//   = Rw @ (Rh @ grid viewed (gh, gw*D)) viewed (nh, gw, D), the batch of nh rows broadcast

Tensor bilinear_resize_grid(const Tensor& grid, int64_t new_h, int64_t new_w) {
  if (grid.dim() != 3 || grid.size(0) == 0 || grid.size(1) == 0 || new_h <= 0 || new_w <= 0)
    throw ShapeError(fmt::format(
        "bilinear_resize_grid: expected a non-empty grid (gh, gw, D) and a positive new size, "
        "got grid {} and new size ({}, {})",
        shape_str(grid.shape()), new_h, new_w));
  if (!is_floating(grid.dtype()))
    throw DTypeError(fmt::format("bilinear_resize_grid: grid must be floating, got {}",
                                 dtype_name(grid.dtype())));
  const int64_t gh = grid.size(0), gw = grid.size(1), D = grid.size(2);
  Tensor rows = matmul(interpolation_matrix(gh, new_h, grid.dtype()), grid.reshape({gh, gw * D}));
  return matmul(interpolation_matrix(gw, new_w, grid.dtype()), rows.view({new_h, gw, D}));
}

Tensor interpolate_pos_embed(const Tensor& pos_embed, std::array<int64_t, 2> old_grid,
                             std::array<int64_t, 2> new_grid, int64_t num_prefix_tokens) {
  const int64_t P = num_prefix_tokens, n_old = old_grid[0] * old_grid[1];
  if (pos_embed.dim() != 3 || pos_embed.size(0) != 1 || P < 0 || pos_embed.size(1) != P + n_old)
    throw ShapeError(fmt::format(
        "interpolate_pos_embed: pos_embed {} must be (1, {} + {}*{}, D) for {} prefix tokens and "
        "the old grid ({}, {})",
        shape_str(pos_embed.shape()), P, old_grid[0], old_grid[1], P, old_grid[0], old_grid[1]));
  const int64_t D = pos_embed.size(2);
  Tensor patches = pos_embed.narrow(1, P, n_old).reshape({old_grid[0], old_grid[1], D});
  Tensor resized = bilinear_resize_grid(patches, new_grid[0], new_grid[1]);
  return cat({pos_embed.narrow(1, 0, P), resized.reshape({1, new_grid[0] * new_grid[1], D})}, 1);
}

// ----------------------------------------------------------------------------
// patch embedding

PatchProjection::PatchProjection(int64_t in_channels, int64_t dim, int64_t patch)
    : Module("PatchProjection") {
  weight_ = register_parameter("weight", empty({dim, in_channels, patch, patch}));
  bias_ = register_parameter("bias", empty({dim}));
  // PyTorch's Conv2d init: kaiming_uniform_(a = sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  init::kaiming_uniform_(weight_, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * patch * patch));
  init::uniform_(bias_, -bound, bound);
}

Tensor PatchProjection::forward(const Tensor& patches) const {
  const int64_t dim = weight_.size(0), K = weight_.numel() / dim;
  if (patches.dim() != 3 || patches.size(2) != K)
    throw ShapeError(fmt::format("PatchProjection: expected patches (B, N, {}), got {}", K,
                                 shape_str(patches.shape())));
  return linear(patches, weight_.view({dim, K}), bias_);
}

PatchEmbedding::PatchEmbedding(int64_t in_channels, int64_t dim, int64_t patch)
    : Module("PatchEmbedding"), in_channels_(in_channels), patch_(patch) {
  if (in_channels <= 0 || dim <= 0 || patch <= 0)
    throw ValueError(
        fmt::format("PatchEmbedding: in_channels ({}), dim ({}) and patch ({}) must be positive",
                    in_channels, dim, patch));
  proj_ = register_module("proj", std::make_shared<PatchProjection>(in_channels, dim, patch));
}

Tensor PatchEmbedding::forward(const Tensor& images) const {
  if (images.dim() != 4 || images.size(1) != in_channels_ || images.size(2) % patch_ != 0 ||
      images.size(3) % patch_ != 0)
    throw ShapeError(fmt::format(
        "PatchEmbedding: expected images (B, {}, H, W) with H and W divisible by {}, got {}",
        in_channels_, patch_, shape_str(images.shape())));
  return (*proj_)(patchify(images, patch_));
}

// ----------------------------------------------------------------------------
// ViT

ViT::ViT(const ViTConfig& c) : Module("ViT"), config_(c) {
  if (c.image_size <= 0 || c.patch_size <= 0 || c.image_size % c.patch_size != 0)
    throw ValueError(
        fmt::format("ViT: image_size ({}) must be a positive multiple of patch_size "
                    "({})",
                    c.image_size, c.patch_size));
  if (c.num_classes <= 0 || c.depth < 0)
    throw ValueError(fmt::format("ViT: num_classes ({}) must be positive and depth ({}) >= 0",
                                 c.num_classes, c.depth));
  const int64_t g = c.image_size / c.patch_size;
  grid_ = {g, g};
  cls_token_ = register_parameter("cls_token", zeros({1, 1, c.dim}));
  pos_embed_ = register_parameter("pos_embed", zeros({1, g * g + 1, c.dim}));
  init::trunc_normal_(cls_token_, 0.0, 0.02);
  init::trunc_normal_(pos_embed_, 0.0, 0.02);
  patch_embed_ = register_module(
      "patch_embed", std::make_shared<PatchEmbedding>(c.in_channels, c.dim, c.patch_size));
  pos_drop_ = register_module("pos_drop", std::make_shared<Dropout>(c.emb_dropout));
  blocks_ = register_module("blocks", std::make_shared<ModuleList>());
  const TransformerEncoderLayerOptions block{c.dim,
                                             c.heads,
                                             c.mlp_dim,
                                             c.dropout,
                                             FFNActivation::GELU,
                                             c.layer_norm_eps,
                                             /*batch_first=*/true,
                                             /*norm_first=*/true};
  for (int64_t i = 0; i < c.depth; ++i)
    blocks_->push_back(std::make_shared<TransformerEncoderLayer>(block));
  norm_ = register_module("norm", std::make_shared<LayerNorm>(c.dim, c.layer_norm_eps));
  head_ = register_module("head", std::make_shared<Linear>(c.dim, c.num_classes));
}

Tensor ViT::features(const Tensor& images) const {
  const int64_t p = config_.patch_size;
  if (images.dim() != 4 || images.size(2) != grid_[0] * p || images.size(3) != grid_[1] * p)
    throw ShapeError(fmt::format(
        "ViT: expected images (B, {}, {}, {}) for the position grid ({}, {}), got {} (use "
        "interpolate_pos_embed for another size)",
        config_.in_channels, grid_[0] * p, grid_[1] * p, grid_[0], grid_[1],
        shape_str(images.shape())));
  Tensor patches = (*patch_embed_)(images);  // (B, N, dim)
  const int64_t B = images.size(0);
  Tensor x = cat({cls_token_.expand({B, 1, config_.dim}), patches}, 1);  // (B, N+1, dim)
  x = (*pos_drop_)(add(x, pos_embed_));
  for (size_t i = 0; i < blocks_->size(); ++i) {
    std::shared_ptr<TransformerEncoderLayer> b = block(i);
    const bool recompute = checkpoint_layers_ && is_training() && i + 1 < blocks_->size();
    x = recompute ? checkpoint([b](const Tensor& in) { return (*b)(in); }, x) : (*b)(x);
  }
  return (*norm_)(x);
}

Tensor ViT::forward(const Tensor& images) const {
  return (*head_)(features(images).select(1, 0));  // the CLS token
}

void ViT::interpolate_pos_embed(std::array<int64_t, 2> new_grid) {
  if (new_grid[0] <= 0 || new_grid[1] <= 0)
    throw ValueError(
        fmt::format("ViT.interpolate_pos_embed: the new grid ({}, {}) must be "
                    "positive",
                    new_grid[0], new_grid[1]));
  NoGradGuard no_grad;
  Tensor resized = nn::interpolate_pos_embed(pos_embed_.detach(), grid_, new_grid).contiguous();
  // NOTE: swap the data under the existing TensorImpl (as Module::to does), so the module's
  // registered handle and any other handle to the parameter see the new table.
  set_data_(pos_embed_, resized);
  grid_ = new_grid;
}

void ViT::set_store_attention(bool on) {
  for (size_t i = 0; i < blocks_->size(); ++i) block(i)->set_store_attention(on);
}

std::vector<Tensor> ViT::attention_maps() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < blocks_->size(); ++i) out.push_back(block(i)->attention_weights());
  return out;
}

Tensor ViT::cls_attention_map() const {
  if (blocks_->size() == 0 || !block(blocks_->size() - 1)->attention_weights().defined())
    throw ValueError(
        "ViT.cls_attention_map: no attention stored; call set_store_attention(true) and run "
        "forward first");
  const Tensor& w = block(blocks_->size() - 1)->attention_weights();  // (B, H, N+1, N+1)
  const int64_t n = grid_[0] * grid_[1];
  if (w.size(3) != n + 1)
    throw ValueError("ViT.cls_attention_map: the stored attention predates interpolate_pos_embed");
  return w.select(2, 0).narrow(2, 1, n).reshape({w.size(0), w.size(1), grid_[0], grid_[1]});
}

}  // namespace nabla::nn
