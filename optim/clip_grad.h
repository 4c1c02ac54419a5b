// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_. Parameters without a
// gradient are skipped; gradients are modified in place.
#pragma once
#include <cmath>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::optim {

// Scales all gradients by max_norm / (total_norm + 1e-6) when that is < 1, where total_norm is
// the norm of all gradients together (norm_type > 0, or INFINITY for the max-abs norm). Returns
// total_norm (before clipping). error_if_nonfinite: throw instead of scaling by a NaN/Inf norm.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace nabla::optim
