// Layers over the fused ops: LayerNorm, Embedding, Dropout, GELU, SiLU. Parameter names and
// default initialisation follow PyTorch, so state dicts move both ways.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>

#include "nabla/core/generator.h"
#include "nabla/nn/module.h"
#include "nabla/ops/activation.h"

namespace nabla::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  DType dtype = kFloat32;
  bool bias = true;  // false: a weight but no bias (PyTorch's LayerNorm(..., bias=False))
};

// Normalises over the trailing dims `normalized_shape`; weight = 1, bias = 0 at init.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, const LayerNormOptions& options = {});
  explicit LayerNorm(int64_t size, const LayerNormOptions& options = {})
      : LayerNorm(Shape{size}, options) {}
  // The positional forms LayerNorm(shape, eps, elementwise_affine, dtype), kept for existing code.
  LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine = true,
            DType dtype = kFloat32)
      : LayerNorm(std::move(normalized_shape),
                  LayerNormOptions{
                      .eps = eps, .elementwise_affine = elementwise_affine, .dtype = dtype}) {}
  LayerNorm(int64_t size, double eps) : LayerNorm(Shape{size}, LayerNormOptions{.eps = eps}) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&LayerNorm::forward, x); }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  double eps() const { return eps_; }

 private:
  Shape normalized_shape_;
  double eps_;
  Tensor weight_, bias_;
};

struct EmbeddingOptions {
  std::optional<int64_t> padding_idx = std::nullopt;  // negative counts from the end
  DType dtype = kFloat32;
};

// A lookup table (num_embeddings, embedding_dim) ~ N(0, 1); the padding_idx row starts at zero
// and gets no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingOptions& options = {});
  // The positional form Embedding(num, dim, padding_idx, dtype), kept for existing code.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
            DType dtype = kFloat32)
      : Embedding(num_embeddings, embedding_dim, EmbeddingOptions{padding_idx, dtype}) {}
  Tensor forward(const Tensor& indices) const;  // int64 (...) -> (..., embedding_dim)
  Tensor operator()(const Tensor& indices) const { return call(&Embedding::forward, indices); }
  const Tensor& weight() const { return weight_; }

 private:
  std::optional<int64_t> padding_idx_;
  Tensor weight_;
};

// Inverted dropout in training mode, the identity in eval mode. Draws its masks from `gen`
// (the default generator unless set), so a seeded run is reproducible.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Dropout::forward, x); }
  void set_generator(Generator& gen) { gen_ = &gen; }
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

class GELU : public Module {
 public:
  explicit GELU(GeluApproximate approximate = GeluApproximate::None)
      : Module("GELU"), approximate_(approximate) {}
  Tensor forward(const Tensor& x) const { return gelu(x, approximate_); }
  Tensor operator()(const Tensor& x) const { return call(&GELU::forward, x); }

 private:
  GeluApproximate approximate_;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) const { return silu(x); }
  Tensor operator()(const Tensor& x) const { return call(&SiLU::forward, x); }
};

}  // namespace nabla::nn
