// Strided copy with dtype conversion: the kernel behind contiguous(), clone(), to() and copy_().
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// dst[...] = src[...] with src broadcast to dst's shape and converted to dst's dtype. No autograd.
void copy_kernel(const Tensor& dst, const Tensor& src);

}  // namespace nabla
