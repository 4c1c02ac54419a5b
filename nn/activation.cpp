// Parameter-free layers: thin wrappers over the ops.
#include "nn/activation.h"

#include "ops/unary.h"

namespace nabla::nn {

Tensor ReLU::forward(const Tensor& x) const { return relu(x); }
Tensor Tanh::forward(const Tensor& x) const { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) const { return sigmoid(x); }
Tensor Flatten::forward(const Tensor& x) const { return x.flatten(start_dim_, end_dim_); }

}  // namespace nabla::nn
