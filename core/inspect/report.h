// The gradient report: after a backward, each parameter's gradient norm; after an optimizer step,
// its update/weight ratio; for a parameter without a gradient, why (a CutRecorder's
// explanation); and the first non-finite gradient in engine order. nn/inspect.h wraps it for a
// model (GradientMonitor).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nabla/core/inspect/cuts.h"
#include "nabla/core/tensor.h"

namespace nabla::inspect {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct ParameterGradient {
  std::string name;
  Shape shape;
  bool has_grad = false;
  double grad_norm = 0;  // L2 norm of .grad (NaN/Inf when the gradient is not finite)
  bool finite = true;
  double weight_norm = 0;               // L2 norm of the parameter now
  std::optional<double> update_ratio;   // |w - w_before| / |w_before|, when a snapshot was given
  std::optional<NoGradientReason> why;  // when has_grad is false
};

struct GradientReport {
  std::vector<ParameterGradient> parameters;
  std::optional<NonFiniteGradient> first_non_finite;

  const ParameterGradient& at(const std::string& name) const;  // throws ValueError if unknown
  std::string to_string() const;  // aligned table, then the first non-finite gradient if any
};

// `recorder` (may be null) explains missing gradients; `before_step` (may be null) is a copy of
// the parameters taken before the optimizer step, same names and order.
GradientReport gradient_report(const NamedTensors& params, const CutRecorder* recorder = nullptr,
                               const NamedTensors* before_step = nullptr);

// Copies of the parameters' values (not recorded, no history), for update ratios.
NamedTensors snapshot(const NamedTensors& params);

}  // namespace nabla::inspect
