// Scatter and mask selection (PyTorch semantics): scatter (tensor or value), masked_select,
// nonzero. Indices must lie in [0, size); an index outside throws IndexError naming the op, the
// index, the dim and its size. gather and scatter_add are in ops/indexing.h.
#pragma once
#include <cstdint>

#include "nabla/core/tensor.h"

namespace nabla {

// y = x, then y[i][index[i][j][k]][k] = src[i][j][k] for dim = 1 (any rank). index has x's
// rank and is no larger than src anywhere nor than x off dim. With duplicate targets the last
// one in index's row-major order wins (torch leaves it unspecified). Any dtype. Gradients:
// x gets grad with the written positions zeroed, src gets gather(grad, dim, index).
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// The same with every written element set to value; differentiable in x.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value);

// The elements of x where mask (bool, broadcast with x) is true, as a 1-D tensor in row-major
// order of the broadcast shape. Differentiable in x.
Tensor masked_select(const Tensor& x, const Tensor& mask);

// int64 (n, x.dim()): the index of each nonzero (true) element of x, row-major. Not
// differentiable.
Tensor nonzero(const Tensor& x);

}  // namespace nabla
