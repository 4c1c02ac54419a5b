// Scaled dot-product attention as one fused op (PyTorch's F.scaled_dot_product_attention):
//   out = dropout(softmax(q k^T * scale + mask)) v
// The fused kernel never builds the (L, S) score matrix of a head: it walks key tiles with an
// online softmax (flash-attention style), keeps only the output and one log-sum-exp per query,
// and its backward recomputes the scores tile by tile. Extra memory is O(L + S) per head, not
// O(L * S).
#pragma once
#include <optional>

#include "nabla/core/generator.h"
#include "nabla/core/tensor.h"

namespace nabla {

struct SdpaOptions {
  // Broadcast to (..., L, S). bool: true = the key takes part (PyTorch's SDPA convention);
  // float (the query's dtype): added to the scores, -inf removes a key.
  Tensor attn_mask{};
  double dropout_p = 0.0;          // on the attention weights; pass 0 in eval mode
  bool is_causal = false;          // key s is hidden from query l when s > l
  std::optional<double> scale{};   // default 1 / sqrt(E)
  Generator* generator = nullptr;  // dropout masks; default_generator() when null
};

// q (..., L, E), k (..., S, E), v (..., S, Ev) with equal leading dims -> (..., L, Ev).
// A query whose keys are all masked gets a zero output and zero gradients (PyTorch gives NaN).
// Dropout element (n, l, s) of the (N, L, S) weights uses the same counter as dropout() on the
// materialised weights would, so the fused op and its composite twin draw identical masks.
// The fused backward falls back to the composite formula (written with ops) under create_graph,
// and the whole op runs the composite when an additive mask requires grad.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SdpaOptions& options = {});

// The same maths written with matmul, masked_softmax and dropout; materialises the weights.
Tensor scaled_dot_product_attention_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const SdpaOptions& options = {});

}  // namespace nabla
