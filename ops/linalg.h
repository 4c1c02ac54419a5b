// Matrix products with PyTorch's matmul semantics.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// 1-D x 1-D: dot product; 2-D x 2-D: matrix product; N-D: batched over broadcast batch dims;
// a 1-D operand is treated as a row (left) or column (right) vector and that dim is removed.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace nabla
