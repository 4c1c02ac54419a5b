#include "nabla/core/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/generator.h"

namespace nabla {
namespace {

// sum(t * w) for float64 tensors of one shape, without autograd.
double project(const Tensor& t, const Tensor& w) {
  Tensor tc = t.detach().contiguous(), wc = w.contiguous();
  const double* tp = tc.data_ptr<double>();
  const double* wp = wc.data_ptr<double>();
  double s = 0;
  for (int64_t i = 0; i < tc.numel(); ++i) s += tp[i] * wp[i];
  return s;
}

// ----------------------------------------------------------------------------
// weighted_sum (gradgradcheck's projection)
//   forward:   y = sum(t * w), w a constant
//   backward:  grad_t = grad * w   (computed directly; its own backward is not needed)
struct WeightedSumBackward final : Node {
  Tensor w;
  explicit WeightedSumBackward(Tensor weights) : w(std::move(weights)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor g = empty(w.shape(), kFloat64);
    const double s = grad.item<double>();
    const double* wp = w.data_ptr<double>();
    double* gp = g.data_ptr<double>();
    for (int64_t i = 0; i < w.numel(); ++i) gp[i] = s * wp[i];
    return {g};
  }
  bool backward_is_differentiable() const override { return false; }
  const char* name() const override { return "WeightedSumBackward"; }
};

Tensor weighted_sum(const Tensor& t, const Tensor& w) {
  Tensor y = scalar_tensor(project(t, w), kFloat64);
  if (auto node = make_node<WeightedSumBackward>({&t}, w)) set_history(y, node);
  return y;
}

// Storage offset of the i-th element (row-major order) of t.
int64_t element_offset(const Tensor& t, int64_t i) {
  int64_t off = t.offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t n = t.shape()[static_cast<size_t>(d)];
    off += (i % n) * t.strides()[static_cast<size_t>(d)];
    i /= n;
  }
  return off;
}

std::string check_inputs(const std::vector<Tensor>& inputs) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (t.dtype() != kFloat64)
      return fmt::format("gradcheck: input {} has dtype {}; use float64", k, dtype_name(t.dtype()));
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.requires_grad() && t.size(d) > 1 && t.stride(d) == 0)
        return fmt::format(
            "gradcheck: input {} (shape {}) is an expanded view whose elements overlap in memory; "
            "expand inside the function instead",
            k, shape_str(t.shape()));
  }
  return "";
}

bool all_zero(const Tensor& t) {
  Tensor c = t.detach().contiguous();
  const double* p = c.data_ptr<double>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (p[i] != 0.0) return false;
  return true;
}

}  // namespace

GradcheckResult gradcheck(const DifferentiableFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opts) {
  GradcheckResult res;
  auto fail = [&](std::string msg) {
    res.ok = false;
    res.message = std::move(msg);
    return res;
  };
  if (std::string err = check_inputs(inputs); !err.empty()) return fail(err);
  std::vector<Tensor> wrt;
  std::vector<size_t> wrt_index;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].requires_grad()) {
      wrt.push_back(inputs[k]);
      wrt_index.push_back(k);
    }
  if (wrt.empty()) return fail("gradcheck: no input requires grad");

  Tensor out = fn(inputs);
  if (out.dtype() != kFloat64)
    return fail(
        fmt::format("gradcheck: output has dtype {}; use float64", dtype_name(out.dtype())));
  Generator gen(opts.seed);
  Tensor w = randn(out.shape(), gen, kFloat64);

  std::vector<Tensor> analytic;
  if (out.requires_grad()) {
    analytic = autograd::grad({out}, wrt, {w}, /*retain_graph=*/true, false, /*allow_unused=*/true);
    // Structural checks: shapes, repeatability, zero in -> zero out.
    auto again = autograd::grad({out}, wrt, {w}, true, false, true);
    auto zero = autograd::grad({out}, wrt, {zeros_like(w)}, true, false, true);
    for (size_t j = 0; j < wrt.size(); ++j) {
      if (!analytic[j].defined()) continue;
      if (analytic[j].shape() != wrt[j].shape())
        return fail(fmt::format("gradcheck: gradient of input {} has shape {}, input has {}",
                                wrt_index[j], shape_str(analytic[j].shape()),
                                shape_str(wrt[j].shape())));
      Tensor a = analytic[j].contiguous(), b = again[j].contiguous();
      const double* ap = a.data_ptr<double>();
      const double* bp = b.data_ptr<double>();
      for (int64_t i = 0; i < a.numel(); ++i)
        if (std::abs(ap[i] - bp[i]) > 1e-12 * (1 + std::abs(ap[i])))
          return fail(
              fmt::format("gradcheck: two backward runs disagree for input {} at element "
                          "{}: {} vs {}",
                          wrt_index[j], i, ap[i], bp[i]));
      if (zero[j].defined() && !all_zero(zero[j]))
        return fail(
            fmt::format("gradcheck: a zero output gradient gave a non-zero gradient for "
                        "input {}",
                        wrt_index[j]));
    }
  } else {
    analytic.resize(wrt.size());
  }

  // Numerical gradient, one element at a time.
  NoGradGuard no_grad;
  double worst_excess = -1;
  std::string worst;
  for (size_t j = 0; j < wrt.size(); ++j) {
    const Tensor& x = wrt[j];
    double* base = static_cast<double*>(x.storage()->data());
    Tensor a = analytic[j].defined() ? analytic[j].contiguous() : zeros(x.shape(), kFloat64);
    const double* ap = a.data_ptr<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t off = element_offset(x, i);
      const double orig = base[off];
      base[off] = orig + opts.eps;
      const double f_plus = project(fn(inputs), w);
      base[off] = orig - opts.eps;
      const double f_minus = project(fn(inputs), w);
      base[off] = orig;
      const double numeric = (f_plus - f_minus) / (2 * opts.eps);
      const double err = std::abs(ap[i] - numeric);
      res.max_abs_error = std::max(res.max_abs_error, err);
      const double excess = err - (opts.atol + opts.rtol * std::abs(numeric));
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = fmt::format("input {} (shape {}) element {}: analytic {:.10g}, numeric {:.10g}",
                            wrt_index[j], shape_str(x.shape()), i, ap[i], numeric);
      }
    }
  }
  if (worst_excess > 0) return fail("gradcheck: mismatch, worst at " + worst);
  res.message = worst.empty() ? "ok" : "ok; closest to tolerance: " + worst;
  return res;
}

GradcheckResult gradgradcheck(const DifferentiableFn& fn, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& opts) {
  if (std::string err = check_inputs(inputs); !err.empty()) return {false, err, 0};
  Tensor probe_out;
  {
    NoGradGuard no_grad;
    probe_out = fn(inputs);
  }
  Generator gen(opts.seed + 1);
  Tensor v = randn(probe_out.shape(), gen, kFloat64).requires_grad_();
  std::vector<Tensor> projections;
  for (const Tensor& x : inputs) projections.push_back(randn(x.shape(), gen, kFloat64));

  const size_t n = inputs.size();
  DifferentiableFn second = [&](const std::vector<Tensor>& args) {
    EnableGradGuard grad_mode;  // gradcheck evaluates us under no-grad for finite differences
    std::vector<Tensor> xs(args.begin(), args.begin() + static_cast<int64_t>(n));
    std::vector<Tensor> wrt;
    std::vector<size_t> idx;
    for (size_t k = 0; k < n; ++k)
      if (xs[k].requires_grad()) {
        wrt.push_back(xs[k]);
        idx.push_back(k);
      }
    Tensor out = fn(xs);
    if (!out.requires_grad()) return scalar_tensor(0.0, kFloat64);
    auto grads = autograd::grad({out}, wrt, {args[n]}, true, /*create_graph=*/true, true);
    Tensor total;
    for (size_t j = 0; j < grads.size(); ++j) {
      if (!grads[j].defined()) continue;
      Tensor term = weighted_sum(grads[j], projections[idx[j]]);
      total = total.defined() ? grad_sum(total, term) : term;
    }
    return total.defined() ? total : scalar_tensor(0.0, kFloat64);
  };
  std::vector<Tensor> args(inputs);
  args.push_back(v);
  GradcheckResult r = gradcheck(second, args, opts);
  if (!r.ok) r.message = "gradgradcheck: " + r.message;
  return r;
}

}  // namespace nabla
