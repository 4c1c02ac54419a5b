// Indexing with int64 index tensors (PyTorch semantics): index_select index_add gather
// scatter_add one_hot. Indices must lie in [0, size); an index outside throws ValueError naming
// the index, the dim and its size. Gradients are correct with duplicate indices (they add up).
#pragma once
#include <cstdint>

#include "nabla/core/tensor.h"

namespace nabla {

// y = x with dim indexed by index (0-d or 1-D): y.size(dim) = index.numel(). Any dtype.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// y = x, then y[..., index[k], ...] += src[..., k, ...] along dim. Differentiable in x and src.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// y[i][j][k] = x[i][index[i][j][k]][k] for dim = 1 (any rank); y has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// y = x, then y[i][index[i][j][k]][k] += src[i][j][k] for dim = 1 (any rank). Differentiable in
// x and src.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// int64 (..., num_classes) with a 1 at each index; num_classes = -1 means max(indices) + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

}  // namespace nabla
