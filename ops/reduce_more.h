// More reductions (PyTorch semantics): prod, and amax/amin over several dims.
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

// Product of all elements (0-d; 1 for an empty tensor) or along dim. float32, float64, int64.
// The gradient is the product of the other elements, exact with zeros in the input.
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);

// Max / min over dims (empty dims = every dim); NaN propagates. Unlike max(x, dim) the gradient
// is split evenly among tied elements, as torch.amax. float32, float64, int64.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

}  // namespace nabla
