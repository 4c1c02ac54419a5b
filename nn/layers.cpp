#include "nabla/nn/layers.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/ops/dropout.h"
#include "nabla/ops/embedding.h"
#include "nabla/ops/layer_norm.h"

namespace nabla::nn {

LayerNorm::LayerNorm(Shape normalized_shape, const LayerNormOptions& options)
    : Module("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(options.eps) {
  if (options.elementwise_affine) {
    weight_ = register_parameter("weight", ones(normalized_shape_, options.dtype));
    if (options.bias) bias_ = register_parameter("bias", zeros(normalized_shape_, options.dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  return layer_norm(x, normalized_shape_, weight_, bias_, eps_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingOptions& options)
    : Module("Embedding"), padding_idx_(options.padding_idx) {
  const std::optional<int64_t>& padding_idx = options.padding_idx;
  if (padding_idx && (*padding_idx < -num_embeddings || *padding_idx >= num_embeddings))
    throw IndexError(fmt::format("Embedding: padding_idx {} is out of range for {} embeddings",
                                 *padding_idx, num_embeddings));
  if (padding_idx_ && *padding_idx_ < 0) *padding_idx_ += num_embeddings;
  weight_ = register_parameter("weight", empty({num_embeddings, embedding_dim}, options.dtype));
  init::normal_(weight_, 0.0, 1.0);
  if (padding_idx_) {
    NoGradGuard no_grad;
    weight_.select(0, *padding_idx_).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) const {
  return embedding(weight_, indices, padding_idx_);
}

Dropout::Dropout(double p) : Module("Dropout"), p_(p), gen_(&default_generator()) {
  if (p < 0 || p > 1)
    throw ValueError(fmt::format("Dropout: probability must be in [0, 1], got {}", p));
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p_, is_training(), *gen_); }

}  // namespace nabla::nn
