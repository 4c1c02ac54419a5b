// layer_norm over the trailing dims (fused forward and backward kernels) and its composite twin.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// Normalises x over its last k = normalized_shape.size() dims (which must equal
// normalized_shape) with biased variance, then applies weight and bias (each optional, shaped
// normalized_shape): y = (x - mean) / sqrt(var + eps) * weight + bias.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// The same maths with primitive ops (mean, sub, mul, pow, ...), for tests and double backward.
Tensor layer_norm_composite(const Tensor& x, const Shape& normalized_shape,
                            const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                            double eps = 1e-5);

}  // namespace nabla
