// Reductions: sum and mean over all elements or over dims (keepdim as in PyTorch).
#pragma once
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

// A bool tensor sums to int64 (its count of true), as in PyTorch; mean takes floating tensors only.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Shape of x with `dims` reduced to size 1 (normalised, duplicates rejected); the building block
// every reduction uses. Empty dims means all dims.
Shape reduced_keepdim_shape(const char* op, const Shape& shape, const std::vector<int64_t>& dims);
// Drops the size-1 reduced dims of a keepdim result.
Shape squeeze_reduced(const Shape& keepdim_shape, const Shape& input_shape,
                      const std::vector<int64_t>& dims);

}  // namespace nabla
