// Ordering along a dim: topk, sort, argsort. float32, float64 and int64; bool is a DTypeError.
// The order is total and stable: equal values keep their input order (lower index first), in
// both directions, and NaN counts as larger than every number (+inf included), as PyTorch's
// sort(stable=True). topk(x, k) is the first k of that sort, so which of several tied values
// topk returns is defined here; PyTorch leaves it to the algorithm (documented nowhere; its CPU
// topk may return later ties first), so parity tests avoid ties at topk's boundary.
#pragma once
#include <cstdint>

#include "nabla/core/tensor.h"
#include "nabla/ops/reduce_dim.h"  // ValuesIndices

namespace nabla {

// The k largest (or smallest) elements along dim and their int64 positions; values and indices
// have x's shape with dim of size k. 0 <= k <= x.size(dim) (a 0-d x counts as size 1 and gives
// its element for k = 0 and 1, as torch.topk). The result is always in sorted order
// (best first); sorted = false is accepted for PyTorch's signature (its order is unspecified
// there). The gradient goes to the chosen positions: scatter_add(zeros, dim, indices, grad).
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                   bool sorted = true);

// x sorted along dim (ascending, or descending) and the permutation that sorts it. Always
// stable; stable = false is accepted for PyTorch's signature and gives the same result.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);

// sort(...).indices without recording anything: int64 positions, not differentiable.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);

}  // namespace nabla
