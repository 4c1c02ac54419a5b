// Matrix products with PyTorch's matmul semantics.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// 1-D x 1-D: dot product; 2-D x 2-D: matrix product; N-D: batched over broadcast batch dims;
// a 1-D operand is treated as a row (left) or column (right) vector and that dim is removed.
Tensor matmul(const Tensor& a, const Tensor& b);

namespace detail {
// matmul's shape checks, ShapeErrors naming matmul and both shapes: each operand at least 1-D,
// the inner dims equal, the batch dims broadcasting. autocast::matmul runs the same ones.
void check_matmul_shapes(const Tensor& a, const Tensor& b);
}  // namespace detail

}  // namespace nabla
