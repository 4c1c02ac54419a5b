// batch_norm, group_norm and rms_norm (PyTorch semantics) and their composite twins.
#pragma once
#include <optional>

#include "nabla/core/tensor.h"

namespace nabla {

// x (N, C, *) normalised per channel. training: over the batch and spatial dims with the biased
// variance, and running_mean / running_var (each (C), may be undefined) are updated in place:
// r = (1 - momentum) r + momentum s, the variance unbiased (n / (n - 1)) as PyTorch does.
// Eval: with the running statistics (both required). weight and bias (C) are optional.
// Errors: one value per channel in training (ValueError, as torch), shape or dtype mismatches.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);

// x (N, C, *): the C channels in num_groups groups (C % num_groups == 0), each group normalised
// over its channels and the spatial dims (biased variance); then weight * y + bias per channel.
// The normalisation runs on layer_norm's fused kernels over the (N, G, C/G * spatial) view.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// The same maths with primitive ops (mean, sub, mul, pow).
Tensor group_norm_composite(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                            const Tensor& bias = Tensor(), double eps = 1e-5);

// y = x / sqrt(mean(x^2) + eps) * weight over the last dims normalized_shape (Zhang & Sennrich
// 2019, "Root Mean Square Layer Normalization"). eps defaults to the dtype's machine epsilon,
// as torch.nn.functional.rms_norm.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

}  // namespace nabla
