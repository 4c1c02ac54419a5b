// Shapes, strides and the NumPy broadcasting rule.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nabla/core/small_vector.h"

namespace nabla {

// Up to six dims live inline (see SmallVector): no allocation for a typical shape or stride.
using Shape = SmallVector<int64_t, 6>;

std::string shape_str(const Shape& s);  // "(2, 3)"; "()" for a scalar
// The product of the dims; ShapeError naming the shape if a dim is negative or it overflows int64.
int64_t shape_numel(const Shape& s);
// Row-major strides (a size-0 or size-1 dim counts as 1); ShapeError naming the shape if one
// of them overflows int64, as (0, 2^62, 2^62)'s first stride 2^124 would.
Shape contiguous_strides(const Shape& s);
// Broadcast two shapes (NumPy rules) or throw ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// The one dim normaliser: dim wrapped into [0, ndim) for a tensor of `shape` (a 0-d tensor
// accepts 0 and -1, like PyTorch), or a ShapeError naming op, the dim and the shape. An op that
// inserts a dim (unsqueeze, stack) passes inserted = 1: the new dim may stand at 0..ndim.
int64_t normalize_dim(const char* op, int64_t dim, const Shape& shape, int64_t inserted = 0);
// normalize_dim for an op that reads the dim's size or stride (size, select, narrow, ...): a 0-d
// tensor has no dim to read, so it is a ShapeError there.
int64_t existing_dim(const char* op, int64_t dim, const Shape& shape);

}  // namespace nabla
