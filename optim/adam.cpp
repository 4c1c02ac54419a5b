// optim::Adam and AdamW. Per element, with g the gradient, at step t (PyTorch's expression order,
// so float64 matches to rounding):
//   Adam:  g = g + weight_decay * p            AdamW: p = p * (1 - lr * weight_decay)
//   m = m * beta1 + (1 - beta1) * g
//   v = v * beta2 + (1 - beta2) * g * g
//   v_max = max(v_max, v)                      (amsgrad; then v_max replaces v below)
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p = p + (-lr / (1 - beta1^t)) * m / denom
// State: "step" (0-d int64), "exp_avg" (m), "exp_avg_sq" (v), "max_exp_avg_sq" (amsgrad).
// The reference kernel below is that update, one parameter and one element at a time; the tuned
// one (optim/kernels/adam.*) updates all of a group's parameters in one parallel pass with a
// branch-free, vectorised loop. NOTE: both files are compiled with -ffp-contract=off (no fused
// multiply-adds), so every build computes exactly the formulas above and the two kernels agree
// bit for bit, and with -fno-math-errno, without which GCC does not vectorise std::sqrt.
#include "nabla/optim/adam.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "nabla/core/error.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/optim/kernels/adam.h"

namespace nabla::optim {

namespace {

using kernels::AdamCoeffs;
using kernels::AdamParam;

// Reference kernel: the update of one parameter, element by element, with the coefficients cast
// to T by coeffs_in, as in the tuned kernel.
template <class T>
void adam_reference(const AdamParam<T>& a, bool decoupled, bool amsgrad) {
  const AdamCoeffs& c = a.c;
  const auto [b1, b2, one_minus_b1, one_minus_b2, wd, decay, bc2_sqrt, eps, neg_step] =
      coeffs_in<T>(c);
  for (int64_t i = 0; i < a.n; ++i) {
    T g = a.g[i];
    if (decoupled) {
      a.p[i] = a.p[i] * decay;  // AdamW: p = p * (1 - lr * weight_decay)
    } else if (c.weight_decay != 0) {
      g = g + wd * a.p[i];  // Adam: L2 decay on the gradient
    }
    a.m[i] = a.m[i] * b1 + one_minus_b1 * g;
    a.v[i] = a.v[i] * b2 + one_minus_b2 * g * g;
    T v = a.v[i];
    if (amsgrad) v = a.vmax[i] = std::max(a.vmax[i], a.v[i]);
    const T denom = std::sqrt(v) / bc2_sqrt + eps;
    a.p[i] = a.p[i] + neg_step * a.m[i] / denom;
  }
}

template <class T>
void step_all(const std::vector<AdamParam<T>>& params, bool decoupled, bool amsgrad,
              bool weight_decay) {
  if (::nabla::kernels::tuned_enabled()) {
    kernels::adam_step(params, decoupled, amsgrad, weight_decay);
  } else {
    for (const AdamParam<T>& a : params) adam_reference(a, decoupled, amsgrad);
  }
}

template <class T>
AdamParam<T> adam_param(const ParamUpdate& u, bool amsgrad, const AdamCoeffs& c) {
  ParamState& state = *u.state;
  return {u.param.data_ptr<T>(),
          u.grad.data_ptr<T>(),
          state["exp_avg"].data_ptr<T>(),
          state["exp_avg_sq"].data_ptr<T>(),
          amsgrad ? state["max_exp_avg_sq"].data_ptr<T>() : nullptr,
          u.param.numel(),
          c};
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
  update_group(group, {ParamUpdate{p, grad, &state}});
}

void Adam::update_group(const ParamGroup& group, const std::vector<ParamUpdate>& updates) {
  // Per parameter, before any work: create the state on first use, count the step, and take the
  // data pointers. Then one pass over all float32 parameters and one over all float64 ones.
  std::vector<AdamParam<float>> f32;
  std::vector<AdamParam<double>> f64;
  for (const ParamUpdate& u : updates) {
    ParamState& state = *u.state;
    const Tensor& p = u.param;
    if (state.empty()) {
      state["exp_avg"] = zeros(p.shape(), p.dtype());
      state["exp_avg_sq"] = zeros(p.shape(), p.dtype());
      if (options_.amsgrad) state["max_exp_avg_sq"] = zeros(p.shape(), p.dtype());
    }
    const auto t = static_cast<double>(increment_step(state));
    const AdamCoeffs c{group.lr,
                       options_.beta1,
                       options_.beta2,
                       options_.eps,
                       group.weight_decay,
                       group.lr / (1 - std::pow(options_.beta1, t)),
                       std::sqrt(1 - std::pow(options_.beta2, t))};
    dispatch_float(p.dtype(), decoupled_ ? "AdamW.step" : "Adam.step", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>) {
        f32.push_back(adam_param<float>(u, options_.amsgrad, c));
      } else {
        f64.push_back(adam_param<double>(u, options_.amsgrad, c));
      }
    });
  }
  const bool weight_decay = group.weight_decay != 0;
  step_all(f32, decoupled_, options_.amsgrad, weight_decay);
  step_all(f64, decoupled_, options_.amsgrad, weight_decay);
}

}  // namespace nabla::optim
