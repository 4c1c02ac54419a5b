// More shape ops (PyTorch semantics): flip roll tile (copies), unbind movedim (views). Every dtype.
// All are written with other differentiable ops (index_select, cat, narrow, repeat, select,
// permute), so gradients of gradients work.
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

// Reverses the order of elements along each of dims (a dim named twice is a ShapeError).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
// Shifts elements along dims[i] by shifts[i], wrapping around; with no dims, x is rolled as if
// flattened and the shape restored.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims = {});
// Tiles x like torch.tile: reps shorter than x.dim() is padded with leading 1s; longer adds dims.
Tensor tile(const Tensor& x, const std::vector<int64_t>& reps);
// The views x.select(dim, i) for every i.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// A view with dims source[i] moved to destination[i]; the other dims keep their order.
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);

}  // namespace nabla
