// Broadcasting's adjoint pair: expand (a view, in views.cpp) and sum_to (a reduction, here).
// The engine calls sum_to to undo broadcasting; ops' sum() reuses its kernel.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// Sums x down to `shape`, which x's shape must broadcast from (leading dims dropped, size-1 dims
// kept). Differentiable: the backward is expand.
Tensor sum_to(const Tensor& x, const Shape& shape);

// The kernel: out has x's rank with size 1 on reduced dims; no autograd. Accumulates in double
// for float32 inputs.
Tensor sum_to_kernel(const Tensor& x, const Shape& keepdim_shape);

}  // namespace nabla
