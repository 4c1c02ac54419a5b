// Statistical reductions over dims (empty dims = every dim; keepdim as in PyTorch): var, std,
// logsumexp, and the vector norms p = 2 and p = inf.
#pragma once
#include <cmath>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

// Variance with Bessel's correction (divide by N - 1) if unbiased, else by N. N - 1 <= 0 gives
// NaN/inf as in PyTorch. The all-element form is unbiased; use var(x, {}, false) for biased.
// (There is deliberately no var(x, bool): var(x, {1}) would silently pick it.)
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased = true,
           bool keepdim = false);
Tensor var(const Tensor& x);
// sqrt(var). Its gradient is 0 where the result is 0, as in PyTorch. Call it as nabla::std.
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased = true,
           bool keepdim = false);
Tensor std(const Tensor& x);

// log(sum(exp(x))) over dims, computed as m + log(sum(exp(x - m))) with m the max: no overflow.
// A row of -inf gives -inf; an empty row gives -inf.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Vector p-norm over dims for p = 2 (sqrt of the sum of squares; gradient 0 at x = 0) or
// p = INFINITY (max |x|; gradient split evenly among ties). Other p throw ValueError.
Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2.0);

}  // namespace nabla
