// var, std, logsumexp, norm. Forward kernels reduce contiguous rows (see row_layout.h) and
// accumulate in double. Backward formulas are written with ops, so gradients of gradients work;
// masks that guard a division are constants of the backward.
#include "nabla/ops/statistics.h"

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/core/strided_loop.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/row_layout.h"
#include "nabla/ops/unary.h"

namespace nabla {
namespace {

// y[r] = f(row r, n_red) for each output element r; f returns a double (the accumulator).
template <class F>
Tensor reduce_rows(const char* op, const kernels::Rows& r, DType dt, F&& f) {
  Tensor y = empty(r.out_shape, dt);
  dispatch_float(dt, op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = r.data.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(r.n_out, std::max<int64_t>(r.n_red, 1), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) yp[o] = static_cast<T>(f(xp + o * r.n_red, r.n_red));
    });
  });
  return y;
}

// Sum of squared deviations from the mean / max(0, n - correction), or its square root (std);
// two passes in double.
Tensor var_kernel(const char* op, const kernels::Rows& r, DType dt, double correction,
                  bool take_sqrt) {
  return reduce_rows(op, r, dt, [correction, take_sqrt](const auto* p, int64_t n) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(p[i]);
    mean /= static_cast<double>(n);
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(p[i]) - mean;
      ss += d * d;
    }
    // NOTE: n - correction <= 0 divides by zero: NaN (or inf), as in PyTorch.
    const double v = ss / std::max(0.0, static_cast<double>(n) - correction);
    return take_sqrt ? std::sqrt(v) : v;
  });
}

// grad of var w.r.t. x: grad_var * 2 (x - mean(x)) / (N - correction), grad_var in keepdim shape.
Tensor var_input_grad(const Tensor& grad_var, const Tensor& x, const std::vector<int64_t>& dims,
                      double divisor) {
  return grad_var * (x - mean(x, dims, /*keepdim=*/true)) * (2.0 / divisor);
}

// grad / y where y != 0, else 0, without a 0/0 anywhere (also not in double backward).
Tensor safe_div_or_zero(const Tensor& grad, const Tensor& y) {
  Tensor zero = eq(y, 0.0);
  return where(zero, 0.0, grad / where(zero, 1.0, y));
}

}  // namespace

// ----------------------------------------------------------------------------
// var
//   forward:   y = sum((x - mean(x))^2) / (N - c) over dims, c = 1 if unbiased else 0
//   backward:  grad_x = grad * 2 (x - mean(x)) / (N - c)      saves x
struct VarBackward final : Node {
  SavedTensor x{this, "x"};
  std::vector<int64_t> dims;
  Shape keepdim_shape;
  double divisor;
  VarBackward(std::vector<int64_t> d, Shape kd, double div)
      : dims(std::move(d)), keepdim_shape(std::move(kd)), divisor(div) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {var_input_grad(grad.reshape(keepdim_shape), x.get(), dims, divisor)};
  }
  const char* name() const override { return "VarBackward"; }
};

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  inspect::OpScope op_scope("var", {&x});
  kernels::Rows r = kernels::rows("var", x, dims, keepdim);
  const double correction = unbiased ? 1.0 : 0.0;
  Tensor y = var_kernel("var", r, x.dtype(), correction, /*take_sqrt=*/false);
  const double divisor = std::max(0.0, static_cast<double>(r.n_red) - correction);
  if (auto node = make_node<VarBackward>({&x}, dims, r.keepdim_shape, divisor)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

Tensor var(const Tensor& x) { return var(x, {}, true, false); }

// ----------------------------------------------------------------------------
// std
//   forward:   y = sqrt(var(x))
//   backward:  grad_x = var's backward applied to grad / (2 y), taken as 0 where y = 0 (PyTorch)
//              saves x and the output y
struct StdBackward final : Node {
  SavedTensor x{this, "x"}, y{this, "y"};
  std::vector<int64_t> dims;
  Shape keepdim_shape;
  double divisor;
  StdBackward(std::vector<int64_t> d, Shape kd, double div)
      : dims(std::move(d)), keepdim_shape(std::move(kd)), divisor(div) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor grad_var =
        safe_div_or_zero(grad.reshape(keepdim_shape), y.get().reshape(keepdim_shape) * 2.0);
    return {var_input_grad(grad_var, x.get(), dims, divisor)};
  }
  const char* name() const override { return "StdBackward"; }
};

Tensor std(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  inspect::OpScope op_scope("std", {&x});
  kernels::Rows r = kernels::rows("std", x, dims, keepdim);
  const double correction = unbiased ? 1.0 : 0.0;
  Tensor y = var_kernel("std", r, x.dtype(), correction, /*take_sqrt=*/true);
  const double divisor = std::max(0.0, static_cast<double>(r.n_red) - correction);
  if (auto node = make_node<StdBackward>({&x}, dims, r.keepdim_shape, divisor)) {
    node->x.save(x);
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

Tensor std(const Tensor& x) { return std(x, {}, true, false); }

// ----------------------------------------------------------------------------
// logsumexp
//   forward:   y = m + log(sum(exp(x - m))), m = max(x) over dims (m = 0 if it is +-inf, so an
//              all -inf row gives log(0) = -inf and a +inf gives +inf, as in PyTorch)
//   backward:  grad_x = grad * exp(x - y)      saves x and the output y
//              (NaN on an all -inf row, as in PyTorch)
struct LogsumexpBackward final : Node {
  SavedTensor x{this, "x"}, y{this, "y"};
  Shape keepdim_shape;
  explicit LogsumexpBackward(Shape kd) : keepdim_shape(std::move(kd)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {grad.reshape(keepdim_shape) * exp(x.get() - y.get().reshape(keepdim_shape))};
  }
  const char* name() const override { return "LogsumexpBackward"; }
};

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  inspect::OpScope op_scope("logsumexp", {&x});
  kernels::Rows r = kernels::rows("logsumexp", x, dims, keepdim);
  Tensor y = reduce_rows("logsumexp", r, x.dtype(), [](const auto* p, int64_t n) {
    double m = kNegInf<double>;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(p[i]));  // skips NaN
    if (std::isinf(m)) m = 0;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(p[i]) - m);
    return m + std::log(s);
  });
  if (auto node = make_node<LogsumexpBackward>({&x}, r.keepdim_shape)) {
    node->x.save(x);
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// norm, p = 2
//   forward:   y = sqrt(sum(x^2)) over dims
//   backward:  grad_x = x * grad / y, taken as 0 where y = 0 (PyTorch)      saves x and output y
struct Norm2Backward final : Node {
  SavedTensor x{this, "x"}, y{this, "y"};
  Shape keepdim_shape;
  explicit Norm2Backward(Shape kd) : keepdim_shape(std::move(kd)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {x.get() *
            safe_div_or_zero(grad.reshape(keepdim_shape), y.get().reshape(keepdim_shape))};
  }
  const char* name() const override { return "Norm2Backward"; }
};

// ----------------------------------------------------------------------------
// norm, p = inf
//   forward:   y = max(|x|) over dims (NaN if any element is NaN; 0 for an empty row)
//   backward:  grad_x = sign(x) * grad / k at the k elements with |x| = y (or NaN), 0 elsewhere
//              (PyTorch splits evenly among ties)      saves x and the output y
namespace {

// Elements of x whose |x| equals the row's norm y (broadcast from keepdim shape), or are NaN.
Tensor max_abs_mask(const Tensor& x, const Tensor& y_kd) {
  Tensor hit = empty(x.shape(), kBool);
  std::array<Shape, 3> st = {hit.strides(), x.strides(),
                             broadcast_strides(y_kd.shape(), y_kd.strides(), x.shape())};
  dispatch_float(x.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    bool* hp = hit.data_ptr<bool>();
    const T* xp = x.data_ptr<T>();
    const T* yp = y_kd.data_ptr<T>();
    strided_for_each<3>(
        x.shape(), st, 1,
        [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
          for (int64_t i = 0; i < n; ++i) {
            const T v = xp[o[1] + i * s[1]];
            hp[o[0] + i * s[0]] = std::isnan(v) || std::abs(v) == yp[o[2] + i * s[2]];
          }
        });
  });
  return hit;
}

}  // namespace

struct NormInfBackward final : Node {
  SavedTensor x{this, "x"}, y{this, "y"};
  std::vector<int64_t> dims;
  Shape keepdim_shape;
  NormInfBackward(std::vector<int64_t> d, Shape kd)
      : dims(std::move(d)), keepdim_shape(std::move(kd)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get();
    Tensor hit = max_abs_mask(xv.detach(), y.get().detach().reshape(keepdim_shape));
    // At least 1: an empty row has no ties, and grad / 0 made its double backward NaN.
    Tensor count = clamp(sum(hit.to(xv.dtype()), dims, /*keepdim=*/true), 1.0, std::nullopt);
    return {sign(xv) * where(hit, grad.reshape(keepdim_shape) / count, 0.0)};
  }
  const char* name() const override { return "NormInfBackward"; }
};

Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  inspect::OpScope op_scope("norm", {&x});
  const bool inf = std::isinf(p) && p > 0;
  if (p != 2.0 && !inf)
    throw ValueError(fmt::format("norm: p = {} is not supported (p = 2 or inf), input {}", p,
                                 shape_str(x.shape())));
  kernels::Rows r = kernels::rows("norm", x, dims, keepdim);
  Tensor y;
  if (inf) {
    y = reduce_rows("norm", r, x.dtype(), [](const auto* p_row, int64_t n) {
      double m = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double a = std::abs(static_cast<double>(p_row[i]));
        if (std::isnan(a)) return a;
        m = std::max(m, a);
      }
      return m;
    });
  } else {
    y = reduce_rows("norm", r, x.dtype(), [](const auto* p_row, int64_t n) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(p_row[i]) * p_row[i];
      return std::sqrt(ss);
    });
  }
  if (inf) {
    if (auto node = make_node<NormInfBackward>({&x}, dims, r.keepdim_shape)) {
      node->x.save(x);
      node->y.save(y, /*is_output=*/true);
      set_history(y, node);
    }
  } else if (auto node = make_node<Norm2Backward>({&x}, r.keepdim_shape)) {
    node->x.save(x);
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

Tensor norm(const Tensor& x, double p) { return norm(x, p, {}, false); }

}  // namespace nabla
