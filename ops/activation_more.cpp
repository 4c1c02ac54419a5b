// More elementwise activations. Each backward is written with ops, so gradients of gradients
// work. Formulas and the conventions at kinks follow PyTorch's (aten/src/ATen/native/
// Activation.cpp and tools/autograd/derivatives.yaml); the stable forms are cited per op.
#include "nabla/ops/activation_more.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/unary.h"

namespace nabla {

namespace {

void check_finite(const char* op, const char* what, double v, const Tensor& x) {
  if (!std::isfinite(v))
    throw ValueError(
        fmt::format("{}: {} must be finite, got {} (input {})", op, what, v, shape_str(x.shape())));
}

// log(1 + e^z) without overflow: max(z, 0) + log1p(e^-|z|) (the standard rewrite, e.g.
// Maechler, "Accurately Computing log(1 - exp(-|a|))", CRAN Rmpfr vignette, 2012, eq. 10).
template <class T>
T log1p_exp(T z) {
  return (z > T(0) ? z : T(0)) + std::log1p(std::exp(-std::fabs(z)));
}

}  // namespace

// ----------------------------------------------------------------------------
// softplus
//   forward:   y = log(1 + e^(beta x)) / beta, or x where beta x > threshold
//   backward:  grad_x = grad * sigmoid(beta x), or grad where beta x > threshold      saves x
struct SoftplusBackward final : Node {
  SavedTensor x{this, "x"};
  double beta, threshold;
  SoftplusBackward(double b, double t) : beta(b), threshold(t) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor bx = mul(x.get(), beta);
    return {where(gt(bx, threshold), grad, mul(grad, sigmoid(bx)))};
  }
  const char* name() const override { return "SoftplusBackward"; }
};

Tensor softplus(const Tensor& x, double beta, double threshold) {
  inspect::OpScope op_scope("softplus", {&x});
  check_finite("softplus", "beta", beta, x);
  if (beta == 0)
    throw ValueError(
        fmt::format("softplus: beta must be nonzero (input {})", shape_str(x.shape())));
  Tensor y = kernels::map_float("softplus", x, [beta, threshold](auto v) {
    using T = decltype(v);
    const T z = v * static_cast<T>(beta);
    return z > static_cast<T>(threshold) ? v : log1p_exp(z) / static_cast<T>(beta);
  });
  if (auto node = make_node<SoftplusBackward>({&x}, beta, threshold)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// leaky_relu
//   forward:   y = x > 0 ? x : slope * x
//   backward:  grad_x = grad * (x > 0 ? 1 : slope)      saves x
struct LeakyReluBackward final : Node {
  SavedTensor x{this, "x"};
  double slope;
  explicit LeakyReluBackward(double s) : slope(s) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {where(gt(x.get(), 0.0), grad, mul(grad, slope))};
  }
  const char* name() const override { return "LeakyReluBackward"; }
};

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  inspect::OpScope op_scope("leaky_relu", {&x});
  check_finite("leaky_relu", "negative_slope", negative_slope, x);
  Tensor y = kernels::map_float("leaky_relu", x, [negative_slope](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : v * static_cast<T>(negative_slope);
  });
  if (auto node = make_node<LeakyReluBackward>({&x}, negative_slope)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// elu
//   forward:   y = x > 0 ? x : alpha * expm1(x)
//   backward:  grad_x = x <= 0 ? grad * alpha * e^x : grad      saves x
//              (PyTorch's rule: a NaN x passes the gradient)
struct EluBackward final : Node {
  SavedTensor x{this, "x"};
  double alpha;
  explicit EluBackward(double a) : alpha(a) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get();
    // exp of min(x, 0): the unselected branch stays finite, so where's backward gets no 0 * inf.
    Tensor e = exp(clamp(xv, std::nullopt, 0.0));
    return {where(le(xv, 0.0), mul(grad, mul(e, alpha)), grad)};
  }
  const char* name() const override { return "EluBackward"; }
};

Tensor elu(const Tensor& x, double alpha) {
  inspect::OpScope op_scope("elu", {&x});
  check_finite("elu", "alpha", alpha, x);
  Tensor y = kernels::map_float("elu", x, [alpha](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : static_cast<T>(alpha) * std::expm1(v);
  });
  if (auto node = make_node<EluBackward>({&x}, alpha)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// mish
//   forward:   y = x * tanh(softplus(x))
//   backward:  grad_x = grad * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x))   saves x
struct MishBackward final : Node {
  SavedTensor x{this, "x"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get();
    Tensor t = tanh(softplus(xv));
    Tensor one = scalar_tensor(1.0, xv.dtype());
    return {mul(grad, add(t, mul(mul(xv, sigmoid(xv)), sub(one, mul(t, t)))))};
  }
  const char* name() const override { return "MishBackward"; }
};

Tensor mish(const Tensor& x) {
  inspect::OpScope op_scope("mish", {&x});
  Tensor y = kernels::map_float("mish", x, [](auto v) { return v * std::tanh(log1p_exp(v)); });
  if (auto node = make_node<MishBackward>({&x})) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// hardtanh
//   forward:   y = min(max(x, min_val), max_val)
//   backward:  grad_x = 0 where x <= min_val or x >= max_val, else grad      saves that bool
//              mask (PyTorch's hardtanh_backward: a NaN x passes the gradient)
struct HardtanhBackward final : Node {
  SavedTensor inside{this, "inside"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {where(inside.get(), grad, 0.0)};
  }
  const char* name() const override { return "HardtanhBackward"; }
};

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  inspect::OpScope op_scope("hardtanh", {&x});
  if (!(min_val <= max_val))
    throw ValueError(fmt::format("hardtanh: min_val {} must not exceed max_val {} (input {})",
                                 min_val, max_val, shape_str(x.shape())));
  Tensor y = kernels::map_float("hardtanh", x, [min_val, max_val](auto v) {
    using T = decltype(v);
    if (std::isnan(v)) return v;
    return v < static_cast<T>(min_val)   ? static_cast<T>(min_val)
           : v > static_cast<T>(max_val) ? static_cast<T>(max_val)
                                         : v;
  });
  if (auto node = make_node<HardtanhBackward>({&x})) {
    node->inside.save(logical_not(logical_or(le(x, min_val), ge(x, max_val))));
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// log_sigmoid
//   forward:   y = -softplus(-x) = min(x, 0) - log1p(e^-|x|)
//   backward:  grad_x = grad * sigmoid(-x)      saves x
struct LogSigmoidBackward final : Node {
  SavedTensor x{this, "x"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {mul(grad, sigmoid(neg(x.get())))};
  }
  const char* name() const override { return "LogSigmoidBackward"; }
};

Tensor log_sigmoid(const Tensor& x) {
  inspect::OpScope op_scope("log_sigmoid", {&x});
  Tensor y = kernels::map_float("log_sigmoid", x, [](auto v) { return -log1p_exp(-v); });
  if (auto node = make_node<LogSigmoidBackward>({&x})) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// log1p
//   forward:   y = log(1 + x)   (C's log1p: exact for tiny x where 1 + x rounds to 1)
//   backward:  grad_x = grad / (1 + x)      saves x
struct Log1pBackward final : Node {
  SavedTensor x{this, "x"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {div(grad, add(x.get(), 1.0))};
  }
  const char* name() const override { return "Log1pBackward"; }
};

Tensor log1p(const Tensor& x) {
  inspect::OpScope op_scope("log1p", {&x});
  Tensor y = kernels::map_float("log1p", x, [](auto v) { return std::log1p(v); });
  if (auto node = make_node<Log1pBackward>({&x})) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// expm1
//   forward:   y = e^x - 1   (C's expm1: exact for tiny x)
//   backward:  grad_x = grad * (y + 1)      saves the output y
struct Expm1Backward final : Node {
  SavedTensor y{this, "y"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {mul(grad, add(y.get(), 1.0))};
  }
  const char* name() const override { return "Expm1Backward"; }
};

Tensor expm1(const Tensor& x) {
  inspect::OpScope op_scope("expm1", {&x});
  Tensor y = kernels::map_float("expm1", x, [](auto v) { return std::expm1(v); });
  if (auto node = make_node<Expm1Backward>({&x})) {
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

}  // namespace nabla
