// Embedding lookup: rows of a (V, D) weight picked by int64 indices of any shape.
#pragma once
#include <cstdint>
#include <optional>

#include "nabla/core/tensor.h"

namespace nabla {

// weight (V, D), indices (...) int64 in [0, V) -> (..., D). Rows at padding_idx (negative counts
// from V) get no gradient. Fused kernels; the backward is not differentiable again.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);
// The same op built from index_select and reshape: slower, but twice differentiable. Used to
// test the fused one.
Tensor embedding_composite(const Tensor& weight, const Tensor& indices,
                           std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace nabla
