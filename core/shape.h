// Shapes, strides and the NumPy broadcasting rule.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/small_vector.h"

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
// Wrap a possibly negative dim into [0, ndim) or throw naming `op`.
int64_t normalize_dim(const char* op, int64_t dim, int64_t ndim);

}  // namespace nabla
