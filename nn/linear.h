// nn::Linear: y = x W^T + b with PyTorch's default initialisation and parameter names.
#pragma once
#include <cstdint>
#include <memory>

#include "nabla/core/generator.h"
#include "nabla/nn/module.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/linear_prepacked.h"

namespace nabla::nn {

class QuantizedLinear;  // nn/quantized.h

struct LinearOptions {
  bool bias = true;
  DType dtype = kFloat32;
};

class Linear : public Module {
 public:
  // weight (out, in) ~ kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in));
  // bias (out) ~ U(-1/sqrt(in), 1/sqrt(in)). Linear(in, out, {.bias = false, .dtype = kFloat64}).
  Linear(int64_t in_features, int64_t out_features, const LinearOptions& options = {});
  // The positional form Linear(in, out, bias, dtype), kept for existing code.
  Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype = kFloat32)
      : Linear(in_features, out_features, LinearOptions{bias, dtype}) {}

  // x (..., in) -> (..., out).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Linear::forward, x); }
  // act(forward(x)) as one fused op (ops/linear.h: linear_activation).
  Tensor forward_activation(const Tensor& x, LinearActivation act) const;

  // Re-draws weight and bias with the default scheme from `gen`.
  void reset_parameters(Generator& gen = default_generator());

  // The weight's column count (MultiheadAttention::prune_heads narrows out_proj's).
  int64_t in_features() const { return weight_.size(1); }
  int64_t out_features() const { return out_features_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined when bias = false

  // Inference through an int8 copy of the weight (nn/quantized.h: quantize_dynamic); null: float.
  void set_quantized(std::shared_ptr<const QuantizedLinear> quantized);
  const std::shared_ptr<const QuantizedLinear>& quantized() const { return quantized_; }

 private:
  void check_input(const Tensor& x) const;  // throws naming Linear and the shapes
  int64_t out_features_;
  Tensor weight_, bias_;
  std::shared_ptr<const QuantizedLinear> quantized_;
  // Inference products on the weight packed once (ops/linear_prepacked.h); empty until used.
  PrepackedLinear prepacked_;

 public:
  const PrepackedLinear& prepacked() const { return prepacked_; }
};

}  // namespace nabla::nn
