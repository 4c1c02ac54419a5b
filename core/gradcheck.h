// gradcheck / gradgradcheck: public API for checking any differentiable function against float64
// central finite differences. The output is projected on a fixed random weighting w (never a
// plain sum, which would hide a transposed gradient): f(x) = sum(w * fn(x)).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;       // names the worst element, or the failed structural check
  double max_abs_error = 0;  // over all checked elements
  explicit operator bool() const { return ok; }
};

using DifferentiableFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Inputs must be float64; those with requires_grad are checked. Also checks that each gradient
// has its input's shape, that two backward runs agree, and that a zero output gradient gives
// zero input gradients. Inputs may be non-contiguous views but must not overlap in memory.
GradcheckResult gradcheck(const DifferentiableFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opts = {});

// Checks the gradient of the gradient: gradcheck of (inputs, v) -> <grad(fn)(inputs) . v, u>.
GradcheckResult gradgradcheck(const DifferentiableFn& fn, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& opts = {});

}  // namespace nabla
