// Pointwise math and selection: sin cos rsqrt reciprocal square erf, clamp, maximum minimum,
// where and masked_fill. All broadcast like PyTorch; gradients follow PyTorch's conventions at
// kinks and ties.
#pragma once
#include <optional>

#include "nabla/core/tensor.h"

namespace nabla {

Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor rsqrt(const Tensor& x);       // 1 / sqrt(x)
Tensor reciprocal(const Tensor& x);  // 1 / x
Tensor square(const Tensor& x);      // x * x (also for int64)
Tensor erf(const Tensor& x);         // the error function

// Limits x to [min, max] (either bound may be absent, not both). The gradient passes where
// min <= x <= max, boundaries included, as in PyTorch. If min > max every element becomes max.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

// Elementwise max/min with broadcasting; NaN propagates. At ties each input gets half the
// gradient, as in PyTorch.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// cond ? a : b elementwise; cond is bool, the three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);

// x with `value` where mask (bool, broadcast to x's shape) is true; no gradient flows there.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace nabla
