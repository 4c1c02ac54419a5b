// nn::Linear over the fused linear op (one GEMM + bias).
#include "nabla/nn/linear.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/nn/quantized.h"
#include "nabla/ops/linear.h"

namespace nabla::nn {

Linear::Linear(int64_t in_features, int64_t out_features, const LinearOptions& options)
    : Module("Linear"), out_features_(out_features) {
  const DType dtype = options.dtype;
  if (in_features < 0 || out_features < 0)
    throw ValueError(fmt::format("Linear: in_features and out_features must be >= 0, got {} and {}",
                                 in_features, out_features));
  if (!is_floating(dtype))
    throw DTypeError(fmt::format("Linear: dtype must be floating, got {}", dtype_name(dtype)));
  weight_ = register_parameter("weight", empty({out_features, in_features}, dtype));
  if (options.bias) bias_ = register_parameter("bias", empty({out_features}, dtype));
  reset_parameters();
}

void Linear::reset_parameters(Generator& gen) {
  init::kaiming_uniform_(weight_, std::sqrt(5.0), init::FanMode::FanIn,
                         init::Nonlinearity::LeakyReLU, gen);
  if (bias_.defined()) {
    const int64_t fan_in = in_features();
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0;
    init::uniform_(bias_, -bound, bound, gen);
  }
}

void Linear::check_input(const Tensor& x) const {
  if (x.dim() < 1 || x.size(-1) != in_features())
    throw ShapeError(fmt::format("Linear: input of shape {} does not end in in_features = {}",
                                 shape_str(x.shape()), in_features()));
  if (x.dtype() != weight_.dtype())
    throw DTypeError(fmt::format("Linear: input dtype {} differs from the weight's dtype {}",
                                 dtype_name(x.dtype()), dtype_name(weight_.dtype())));
}

Tensor Linear::forward(const Tensor& x) const {
  check_input(x);
  if (quantized_) return quantized_->forward_for(*this, x);
  if (Tensor y = prepacked_.try_forward(x, weight_, bias_); y.defined()) return y;
  return linear(x, weight_, bias_);  // one GEMM over the flattened leading dims
}

Tensor Linear::forward_activation(const Tensor& x, LinearActivation act) const {
  ScopeEntry scope = enter_scope();  // grouped with this module in graph pictures; no hooks
  check_input(x);
  if (quantized_) return quantized_->forward_for(*this, x, act);
  if (Tensor y = prepacked_.try_forward(x, weight_, bias_, act); y.defined()) return y;
  return linear_activation(x, weight_, bias_, act);
}

void Linear::set_quantized(std::shared_ptr<const QuantizedLinear> quantized) {
  quantized_ = std::move(quantized);
}

}  // namespace nabla::nn
