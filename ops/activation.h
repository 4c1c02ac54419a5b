// Smooth activations: GELU (exact and tanh-approximated, fused, with a composite twin) and SiLU.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

enum class GeluApproximate { None, Tanh };

// x * Phi(x) (None, the exact erf form) or PyTorch's tanh approximation (Tanh). Fused kernels
// forward and backward; gradients of any order.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::None);
// grad * gelu'(x), as a recorded op (its own backward uses primitive ops): GELU's backward, also
// used by fused ops whose backward runs under create_graph.
Tensor gelu_backward(const Tensor& grad, const Tensor& x,
                     GeluApproximate approximate = GeluApproximate::None);
// The same function built from primitive ops (erf/tanh, mul, add); the reference for gelu.
Tensor gelu_composite(const Tensor& x, GeluApproximate approximate = GeluApproximate::None);
// x * sigmoid(x), also called swish.
Tensor silu(const Tensor& x);

}  // namespace nabla
