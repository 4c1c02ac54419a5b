// Parameter-free layers: thin wrappers over the ops.
#include "nabla/nn/activation.h"

#include "nabla/ops/activation_more.h"
#include "nabla/ops/unary.h"

namespace nabla::nn {

Tensor ReLU::forward(const Tensor& x) const { return relu(x); }
Tensor Tanh::forward(const Tensor& x) const { return tanh(x); }
Tensor Softplus::forward(const Tensor& x) const { return softplus(x, beta_, threshold_); }
Tensor LeakyReLU::forward(const Tensor& x) const { return leaky_relu(x, negative_slope_); }
Tensor ELU::forward(const Tensor& x) const { return elu(x, alpha_); }
Tensor Mish::forward(const Tensor& x) const { return mish(x); }
Tensor Hardtanh::forward(const Tensor& x) const { return hardtanh(x, min_val_, max_val_); }
Tensor LogSigmoid::forward(const Tensor& x) const { return log_sigmoid(x); }
Tensor Sigmoid::forward(const Tensor& x) const { return sigmoid(x); }
Tensor Flatten::forward(const Tensor& x) const { return x.flatten(start_dim_, end_dim_); }

}  // namespace nabla::nn
