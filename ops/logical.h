// Tests on values, returning bool tensors (not differentiable): any and all (over everything or
// one dim), isnan and isfinite. Every dtype is accepted; a nonzero (or NaN) value counts as true.
#pragma once
#include <cstdint>

#include "nabla/core/tensor.h"

namespace nabla {

Tensor any(const Tensor& x);  // 0-d bool; false for an empty tensor
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& x);  // 0-d bool; true for an empty tensor
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor isnan(const Tensor& x);     // false everywhere for int64 and bool
Tensor isfinite(const Tensor& x);  // true everywhere for int64 and bool

}  // namespace nabla
