// Pieces shared by PyTorch's Transformer layers and stacks (nn/transformer.h,
// nn/transformer_decoder.h): the residual sublayer in either norm order, the feed-forward block,
// option and cache checks, and the layer-list construction.
#pragma once
#include <fmt/format.h>

#include <memory>

#include "nabla/core/error.h"
#include "nabla/nn/container.h"
#include "nabla/nn/layers.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/transformer.h"
#include "nabla/ops/arithmetic.h"

namespace nabla::nn::transformer_detail {

// One sublayer f with its residual connection (Xiong et al. 2020, "On Layer Normalization in the
// Transformer Architecture", fig. 1): post-norm norm(x + f(x)), pre-norm x + f(norm(x)).
template <class F>
Tensor sublayer(bool norm_first, const LayerNorm& norm, const Tensor& x, F&& f) {
  return norm_first ? add(x, f(norm(x))) : norm(add(x, f(x)));
}

// linear2(dropout(activation(linear1(x)))), linear1 and its activation as one fused op (the bias
// in the GEMM, one pass for the rest).
Tensor feed_forward(const Linear& linear1, const Dropout& dropout, const Linear& linear2,
                    FFNActivation activation, const Tensor& x);

// d_model, nhead and dim_feedforward positive, d_model divisible by nhead.
void check_layer_options(const char* who, const TransformerLayerOptions& o);

// A cached self-attention holds only earlier positions, so it must be causal with no explicit
// mask: a clear error in the caller's own names otherwise.
void check_cached_self_attention(const char* who, bool is_causal, const char* causal_name,
                                 const Tensor& mask, const char* mask_name);

// Fills `layers` with num_layers layers from make_layer, refusing the same layer twice.
template <class Factory>
void build_layers(const char* who, ModuleList& layers, const Factory& make_layer,
                  int64_t num_layers) {
  if (num_layers < 0)
    throw ValueError(fmt::format("{}: num_layers must be >= 0, got {}", who, num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    auto layer = make_layer();
    if (!layer) throw ValueError(fmt::format("{}: the layer factory returned null", who));
    for (const auto& existing : layers)
      if (existing == layer)
        throw ValueError(fmt::format("{}: the layer factory returned the same layer twice", who));
    layers.push_back(std::move(layer));
  }
}

}  // namespace nabla::nn::transformer_detail
