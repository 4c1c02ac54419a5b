// Elementwise math and the basic activations: exp log sqrt abs sign tanh sigmoid relu.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // gradient is zero everywhere
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);

}  // namespace nabla
