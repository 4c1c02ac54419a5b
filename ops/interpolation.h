// Elementwise ops of two or three tensors: clamp by tensor bounds, lerp, atan2. All broadcast like
// PyTorch; clamp also takes int64, lerp and atan2 float32/float64.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// Limits x to [min, max] elementwise, the three broadcast together; an undefined Tensor() is an
// absent bound (not both). NaN in x stays NaN; where min > max the result is max. Gradients as
// PyTorch: x where min <= x <= max; min where x < min (and min < max); max where x > max or
// max < min.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);

// start + weight * (end - start), evaluated as end - (end - start) * (1 - weight) for
// |weight| >= 0.5 (PyTorch's form: exact at weight = 1). Gradients: start (1 - w), end w,
// weight (end - start).
Tensor lerp(const Tensor& start, const Tensor& end, double weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);

// The angle of the point (b, a) in (-pi, pi], as C's atan2(a, b). At a = b = 0 the gradient is
// 0/0 = NaN, as in PyTorch.
Tensor atan2(const Tensor& a, const Tensor& b);

}  // namespace nabla
