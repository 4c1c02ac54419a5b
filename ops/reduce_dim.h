// Selecting reductions and scans along a dim: max min (values and indices, or over all
// elements), argmax argmin, cumsum. NaN counts as larger (and smaller) than every number, like
// PyTorch: a row with a NaN reduces to that NaN.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

struct ValuesIndices {
  Tensor values;   // x's dtype
  Tensor indices;  // int64, the position along dim (the first one on ties)
};

// Max/min along dim; the gradient goes to the returned index only.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
// Max/min over all elements (0-d); the gradient is split evenly among tied elements.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);

// int64 position of the max/min along dim (first occurrence on ties); not differentiable.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// Position in the flattened (row-major) x.
Tensor argmax(const Tensor& x);
Tensor argmin(const Tensor& x);

// Running sum along dim: y[..., i, ...] = sum_{k <= i} x[..., k, ...].
Tensor cumsum(const Tensor& x, int64_t dim);

}  // namespace nabla
