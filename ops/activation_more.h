// More elementwise activations, PyTorch's torch.nn.functional forms: softplus, leaky_relu, elu,
// mish, hardtanh, log_sigmoid, and the numerically careful log1p and expm1. Float32/float64;
// every backward is written with ops (gradients of any order).
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (PyTorch's linear region).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
// x for x > 0, negative_slope * x otherwise (the gradient at 0 is negative_slope, as in PyTorch).
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// x for x > 0, alpha (e^x - 1) otherwise (the gradient at 0 is alpha, as in PyTorch).
Tensor elu(const Tensor& x, double alpha = 1.0);
// x tanh(softplus(x)) (Misra 2019, arXiv:1908.08681).
Tensor mish(const Tensor& x);
// x limited to [min_val, max_val]; the gradient passes strictly inside, as in PyTorch.
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
// log(sigmoid(x)), without overflow for large |x|.
Tensor log_sigmoid(const Tensor& x);
Tensor log1p(const Tensor& x);  // log(1 + x), accurate for small x
Tensor expm1(const Tensor& x);  // e^x - 1, accurate for small x

}  // namespace nabla
