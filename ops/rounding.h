// Rounding and division remainders, as PyTorch: floor, ceil, round (half to even), fmod (the sign
// of the dividend, C's fmod) and remainder (the sign of the divisor, Python's %).
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// Float inputs are rounded; int64 inputs come back unchanged. The gradient is zero everywhere.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // halves to the even neighbour: round(2.5) = 2, round(-0.5) = -0

// a - trunc(a / b) * b, broadcast; float32/float64. Gradients as PyTorch defines them:
// grad_a = grad, grad_b = -grad * trunc(a / b).
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, double b);
// a - floor(a / b) * b, broadcast; float32/float64. grad_a = grad, grad_b = -grad * floor(a / b).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, double b);

}  // namespace nabla
