// linear: the affine map of nn.Linear, as one GEMM.
#pragma once
#include "core/tensor.h"

namespace nabla {

// y = x @ weight^T + bias. x (..., in) or (in,), weight (out, in), bias (out,) optional;
// y (..., out). The leading dims of x are flattened into one GEMM of M = numel / in rows.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace nabla
