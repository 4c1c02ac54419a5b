// linear: the affine map of nn.Linear, as one GEMM.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// y = x @ weight^T + bias. x (..., in) or (in,), weight (out, in), bias (out,) optional;
// y (..., out). The leading dims of x are flattened into one GEMM of M = numel / in rows.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// The activations linear_activation fuses.
enum class LinearActivation { ReLU, GELU, GELUTanh };

// act(x @ weight^T + bias), fused: the bias goes into the GEMM, the activation follows in one
// pass (ReLU in place), and the backward computes act' and the bias gradient in one pass over the
// rows. Same arguments as linear. Under create_graph its backward is written with ops.
Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         LinearActivation act);
// relu / gelu of linear(x, weight, bias): the composite twin.
Tensor linear_activation_composite(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   LinearActivation act);

}  // namespace nabla
