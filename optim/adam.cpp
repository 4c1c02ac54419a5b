// optim::Adam and AdamW. Per element, with g the gradient, at step t (PyTorch's expression order,
// so float64 matches to rounding):
//   Adam:  g = g + weight_decay * p            AdamW: p = p * (1 - lr * weight_decay)
//   m = m * beta1 + (1 - beta1) * g
//   v = v * beta2 + (1 - beta2) * g * g
//   v_max = max(v_max, v)                      (amsgrad; then v_max replaces v below)
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p = p + (-lr / (1 - beta1^t)) * m / denom
// State: "step" (0-d int64), "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq" (amsgrad).
#include "optim/adam.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace nabla::optim {

namespace {

struct AdamCoeffs {
  double lr, beta1, beta2, eps, weight_decay;
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  bool amsgrad, decoupled;
};

template <class T>
void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, int64_t begin, int64_t end,
                 const AdamCoeffs& c) {
  const T b1 = static_cast<T>(c.beta1), b2 = static_cast<T>(c.beta2);
  const T one_minus_b1 = static_cast<T>(1 - c.beta1), one_minus_b2 = static_cast<T>(1 - c.beta2);
  const T wd = static_cast<T>(c.weight_decay), decay = static_cast<T>(1 - c.lr * c.weight_decay);
  const T bc2_sqrt = static_cast<T>(c.bias_correction2_sqrt), eps = static_cast<T>(c.eps);
  const T neg_step = static_cast<T>(-c.step_size);
  for (int64_t i = begin; i < end; ++i) {
    T gi = g[i];
    if (c.decoupled)
      p[i] = p[i] * decay;
    else if (c.weight_decay != 0)
      gi = gi + wd * p[i];
    m[i] = m[i] * b1 + one_minus_b1 * gi;
    v[i] = v[i] * b2 + one_minus_b2 * gi * gi;
    T vi = v[i];
    if (c.amsgrad) vi = vmax[i] = std::max(vmax[i], v[i]);
    const T denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = p[i] + neg_step * m[i] / denom;
  }
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params)}};
}

AdamOptions as_adam(const AdamWOptions& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad};
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", one_group(std::move(params)), options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(const char* name, std::vector<ParamGroup> groups, const AdamOptions& options,
           bool decoupled_weight_decay)
    : Optimizer(name, std::move(groups), options.lr, options.weight_decay),
      options_(options),
      decoupled_(decoupled_weight_decay) {
  if (!(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1))
    throw ValueError(fmt::format("{}: betas must be in [0, 1), got ({}, {})", name, options.beta1,
                                 options.beta2));
  if (!(options.eps >= 0)) throw ValueError(fmt::format("{}: invalid eps {}", name, options.eps));
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : Adam("AdamW", one_group(std::move(params)), as_adam(options), true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Adam("AdamW", std::move(groups), as_adam(options), true) {}

std::vector<std::string> Adam::state_keys() const {
  if (options_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"};
  return {"exp_avg", "exp_avg_sq", "step"};
}

void Adam::update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& state) {
  if (state.empty()) {
    state["exp_avg"] = zeros(p.shape(), p.dtype());
    state["exp_avg_sq"] = zeros(p.shape(), p.dtype());
    if (options_.amsgrad) state["max_exp_avg_sq"] = zeros(p.shape(), p.dtype());
  }
  const auto t = static_cast<double>(increment_step(state));
  AdamCoeffs c{group.lr,
               options_.beta1,
               options_.beta2,
               options_.eps,
               group.weight_decay,
               group.lr / (1 - std::pow(options_.beta1, t)),
               std::sqrt(1 - std::pow(options_.beta2, t)),
               options_.amsgrad,
               decoupled_};
  dispatch_float(p.dtype(), decoupled_ ? "AdamW.step" : "Adam.step", [&](auto tag) {
    using T = decltype(tag);
    T* pp = p.data_ptr<T>();
    const T* gp = grad.data_ptr<T>();
    T* m = state["exp_avg"].data_ptr<T>();
    T* v = state["exp_avg_sq"].data_ptr<T>();
    T* vmax = c.amsgrad ? state["max_exp_avg_sq"].data_ptr<T>() : nullptr;
    // Elementwise, so a parallel split gives bitwise the same result as a serial loop.
    parallel_for(p.numel(), 16,
                 [&](int64_t b, int64_t e) { adam_kernel<T>(pp, gp, m, v, vmax, b, e, c); });
  });
}

}  // namespace nabla::optim
