// Gradient clipping. Norms accumulate in float64 whatever the gradient dtype.
#include "nabla/optim/clip_grad.h"

#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/sum_lanes.h"

namespace nabla::optim {

namespace {

std::vector<Tensor> defined_grads(const char* op, const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) throw ValueError(fmt::format("{}: parameter {} is undefined", op, i));
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    if (!is_floating(g.dtype()))
      throw DTypeError(fmt::format("{}: gradient {} has dtype {}", op, i, dtype_name(g.dtype())));
    grads.push_back(g);
  }
  return grads;
}

// Runs f(T* data, n) over a contiguous copy of g (or g itself) and writes the result back.
template <class F>
void modify_in_place(const char* op, Tensor g, F f) {
  Tensor c = g.contiguous();
  dispatch_float(c.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    f(c.data_ptr<T>(), c.numel());
  });
  if (!c.same(g)) g.copy_(c);
  g.storage()->bump_version();
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  if (!(norm_type > 0))
    throw ValueError(
        fmt::format("clip_grad_norm_: norm_type must be > 0 or INFINITY, got {}", norm_type));
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = defined_grads("clip_grad_norm_", params);
  if (grads.empty()) return 0.0;
  const bool inf_norm = std::isinf(norm_type);
  double acc = 0;  // max |g| for the inf-norm, else sum |g|^p
  for (const Tensor& g : grads) {
    Tensor c = g.contiguous();
    dispatch_float(c.dtype(), "clip_grad_norm_", [&](auto tag) {
      using T = decltype(tag);
      const T* p = c.data_ptr<T>();
      if (!inf_norm && norm_type == 2.0) {  // the common case, in independent lanes
        acc += sum_lanes<double>(p, c.numel(), [](double a) { return a * a; });
        return;
      }
      for (int64_t i = 0; i < c.numel(); ++i) {
        const double a = std::abs(static_cast<double>(p[i]));
        if (inf_norm)
          acc = std::isnan(a) ? a : std::max(acc, a);
        else
          acc += norm_type == 2.0 ? a * a : std::pow(a, norm_type);
      }
    });
  }
  const double total = inf_norm           ? acc
                       : norm_type == 2.0 ? std::sqrt(acc)
                                          : std::pow(acc, 1.0 / norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    throw ValueError(fmt::format(
        "clip_grad_norm_: the total norm of order {} of the gradients is non-finite ({})",
        norm_type, total));
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (const Tensor& g : grads)
      modify_in_place("clip_grad_norm_", g, [&](auto* p, int64_t n) {
        using T = std::remove_reference_t<decltype(*p)>;
        const auto c = static_cast<T>(coef);
        for (int64_t i = 0; i < n; ++i) p[i] = p[i] * c;
      });
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  if (!(clip_value >= 0))
    throw ValueError(fmt::format("clip_grad_value_: clip_value must be >= 0, got {}", clip_value));
  NoGradGuard no_grad;
  for (const Tensor& g : defined_grads("clip_grad_value_", params))
    modify_in_place("clip_grad_value_", g, [&](auto* p, int64_t n) {
      using T = std::remove_reference_t<decltype(*p)>;
      const auto hi = static_cast<T>(clip_value);
      for (int64_t i = 0; i < n; ++i) p[i] = std::clamp(p[i], -hi, hi);
    });
}

}  // namespace nabla::optim
