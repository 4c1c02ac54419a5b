// cross_entropy (fused with log_softmax) and nll_loss: the class-indexed losses. Inputs
// (N, C, d1, ...) are viewed as rows of C classes around the class dim (ops/row_layout.h: outer =
// N, n = C, inner = d1 * ...; one row per position); an unbatched (C,) input is one row.
// Per-position losses and all sums are computed in double. cross_entropy runs its plain reference
// kernel (below, with the math) or the tuned one (ops/kernels/cross_entropy.h, bitwise the same;
// NABLA_KERNELS=reference picks the former); its backward is a kernel too, written with ops when
// grad mode is on (create_graph). nll_loss is a plain loop with an ops backward.
#include "nabla/ops/loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/kernels/cross_entropy.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/loss_common.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/row_layout.h"
#include "nabla/ops/softmax.h"
#include "nabla/ops/unary.h"
#include "nabla/ops/vec_math.h"

namespace nabla {
using kernels::RowLayout;
using loss_detail::finish_loss;
using loss_detail::position_grad;
using loss_detail::reduce_composite;
namespace {

// The class dim: 1, or 0 for an unbatched (C,) input.
int64_t class_dim(const Shape& s) { return s.size() == 1 ? 0 : 1; }

// Rows of C classes, one per position.
RowLayout class_rows(const Shape& s) { return kernels::row_layout(s, class_dim(s)); }

RowLayout checked_class_rows(const char* op, const Tensor& input) {
  if (!is_floating(input.dtype()))
    throw DTypeError(fmt::format("{}: input must be float32 or float64, got {} {}", op,
                                 dtype_name(input.dtype()), shape_str(input.shape())));
  if (input.dim() == 0)
    throw ShapeError(fmt::format("{}: input must be (C,), (N, C) or (N, C, d1, ...), got ()", op));
  return class_rows(input.shape());
}

// Checks an int64 index target (input's shape without the class dim) and returns how many
// targets are not ignore_index. Every other index must lie in [0, C).
int64_t check_index_target(const char* op, const Tensor& input, const Tensor& target,
                           int64_t ignore_index) {
  const int64_t C = checked_class_rows(op, input).n;
  if (target.dtype() != kInt64)
    throw DTypeError(fmt::format(
        "{}: target must be int64 class indices, got {} {}; convert labels with target.to(kInt64)",
        op, dtype_name(target.dtype()), shape_str(target.shape())));
  Shape expected = input.shape();
  expected.erase(expected.begin() + class_dim(input.shape()));
  if (target.shape() != expected)
    throw ShapeError(fmt::format("{}: target {} does not match input {} (expected target {})", op,
                                 shape_str(target.shape()), shape_str(input.shape()),
                                 shape_str(expected)));
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  int64_t count = 0;
  const int64_t P = t.numel();  // hoisted: numel() is a call that multiplies the dims
  for (int64_t p = 0; p < P; ++p) {
    if (tp[p] == ignore_index) continue;
    if (tp[p] < 0 || tp[p] >= C)
      throw IndexError(
          fmt::format("{}: target index {} is out of range for {} classes (ignore_index is {})", op,
                      tp[p], C, ignore_index));
    ++count;
  }
  return count;
}

// A float target is read as class probabilities (logits' shape). One shaped like index targets is
// most likely class labels stored as floats: the message says so and how to pass either kind.
void check_probability_target(const char* op, const Tensor& logits, const Tensor& target) {
  Shape index_shape = logits.shape();
  index_shape.erase(index_shape.begin() + class_dim(logits.shape()));
  if (target.shape() == index_shape && target.shape() != logits.shape())
    throw DTypeError(fmt::format(
        "{}: targets must be int64 class indices (got {} of shape {}); for class probabilities "
        "pass a float target of the logits' shape {}; convert labels with target.to(kInt64)",
        op, dtype_name(target.dtype()), shape_str(target.shape()), shape_str(logits.shape())));
  if (target.shape() != logits.shape())
    throw ShapeError(fmt::format(
        "{}: a float target holds class probabilities and must have the logits' shape {}, got {}; "
        "class indices are int64 of shape {}",
        op, shape_str(logits.shape()), shape_str(target.shape()), shape_str(index_shape)));
  kernels::check_same_dtype(op, logits, target);
}

// The gradient reaching each position's loss (loss_common.h), with the class dim cd restored
// (size 1) so it broadcasts against the input.
Tensor class_position_grad(const Tensor& grad, Reduction r, double count, int64_t cd) {
  // count 0 (every target ignored): every position's gradient is masked to 0 afterwards, and
  // dividing by 1 keeps 0 * (g / 0) from making it NaN (the kernels and PyTorch give 0 there).
  Tensor g = position_grad(grad, r, std::max(count, 1.0));
  return r == Reduction::None ? g.unsqueeze(cd) : g;
}

// Index targets as a distribution in input's shape: (1 - eps) at the target class plus eps / C
// everywhere, and all zeros at ignored positions. Constant data (no autograd).
Tensor target_distribution(const Shape& in_shape, DType dt, const Tensor& target,
                           int64_t ignore_index, double eps) {
  Tensor dist = zeros(in_shape, dt);
  const RowLayout l = class_rows(in_shape);
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  dispatch_float(dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    T* dp = dist.data_ptr<T>();
    const int64_t P = t.numel();
    for (int64_t p = 0; p < P; ++p) {
      if (tp[p] == ignore_index) continue;
      T* row = dp + l.row_start(p);
      for (int64_t c = 0; c < l.n; ++c) row[c * l.inner] = static_cast<T>(eps / double(l.n));
      row[tp[p] * l.inner] += static_cast<T>(1.0 - eps);
    }
  });
  return dist;
}

// 1 at counted positions, 0 at ignored ones, shaped (N, 1, d1, ...) in dtype dt.
Tensor valid_positions(const Tensor& target, int64_t ignore_index, int64_t cd, DType dt) {
  Tensor t = target.contiguous(), v = empty(target.shape(), dt);
  const int64_t* tp = t.data_ptr<int64_t>();
  dispatch_float(dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    T* vp = v.data_ptr<T>();
    const int64_t P = t.numel();
    for (int64_t p = 0; p < P; ++p) vp[p] = tp[p] == ignore_index ? T(0) : T(1);
  });
  return v.unsqueeze(cd);
}

void check_smoothing(double eps) {
  if (!(eps >= 0.0 && eps <= 1.0))
    throw ValueError(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", eps));
}

}  // namespace

// ----------------------------------------------------------------------------
// cross_entropy, index targets (fused log_softmax + NLL with label smoothing eps)
//   forward:   loss[p] = lse[p] - (1 - eps) z[p, t] - eps / C sum_c z[p, c]   (0 if ignored)
//              lse[p] = log sum_c exp(z[p, c]); then the reduction
//   backward:  grad_z[p, c] = g[p] (softmax(z)[p, c] - (1 - eps) [c == t] - eps / C)
//              (0 at ignored positions)     saves logits, target and lse (float64, per position)
// cross_entropy, probability targets p (same shape as the logits z)
//   forward:   loss[pos] = sum_c q[c] (lse - z[c]),  q = (1 - eps) p + eps / C
//   backward:  grad_z = g (softmax(z) sum_c q - q),  grad_p = -g (1 - eps) log_softmax(z)
//              (written with the fused softmax ops)      saves logits and target
namespace {

// One position (a row of C classes, `inner` apart) at a time, as the banners read. lse is
// max + log(sum exp(z - max)), the sum in double in class order; exps in T's own precision
// (vec_math::exp_t: libm for float64, a 2-ulp polynomial for float32). The tuned kernel keeps
// exactly these operations, so the two agree bitwise.
void cross_entropy_reference(const Tensor& z, const Tensor& target, const RowLayout& l,
                             const CrossEntropyOptions& opts, std::vector<double>& per,
                             double* lse) {
  const bool probs = is_floating(target.dtype());
  const double eps = opts.label_smoothing, C = static_cast<double>(l.n);
  dispatch_float(z.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    const T* qp = probs ? target.data_ptr<T>() : nullptr;
    const int64_t* tp = probs ? nullptr : target.data_ptr<int64_t>();
    for (int64_t p = 0; p < l.rows(); ++p) {
      const T* row = zp + l.row_start(p);  // class c is row[c * l.inner]
      T m = kNegInf<T>;
      for (int64_t c = 0; c < l.n; ++c) m = std::max(m, row[c * l.inner]);
      double s = 0;
      for (int64_t c = 0; c < l.n; ++c)
        s += static_cast<double>(vec_math::exp_t<T>(row[c * l.inner] - m));
      const double lse_p = static_cast<double>(m) + std::log(s);
      if (probs) {
        const T* q = qp + l.row_start(p);
        double loss = 0;
        for (int64_t c = 0; c < l.n; ++c)
          loss +=
              ((1.0 - eps) * double(q[c * l.inner]) + eps / C) * (lse_p - double(row[c * l.inner]));
        per[static_cast<size_t>(p)] = loss;
        continue;
      }
      const int64_t t = tp[p];
      if (t == opts.ignore_index) continue;
      double loss = lse_p - (1.0 - eps) * double(row[t * l.inner]);
      if (eps != 0.0) {
        double zsum = 0;
        for (int64_t c = 0; c < l.n; ++c) zsum += double(row[c * l.inner]);
        loss -= eps / C * zsum;
      }
      lse[p] = lse_p;
      per[static_cast<size_t>(p)] = loss;
    }
  });
}

// grad_z for index targets, one position at a time; g[p] is grad[p] (Reduction::None) or the
// scalar grad, divided by count for Mean. softmax(z) = exp(z - lse), in T's precision.
void cross_entropy_backward_reference(const Tensor& z, const Tensor& target, const double* lse,
                                      const Tensor& grad, const RowLayout& l,
                                      const CrossEntropyOptions& opts, double count,
                                      Tensor& grad_z) {
  const double eps = opts.label_smoothing, C = static_cast<double>(l.n);
  const double scale = opts.reduction == Reduction::Mean ? count : 1.0;
  const int64_t* tp = target.data_ptr<int64_t>();
  dispatch_float(z.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T *zp = z.data_ptr<T>(), *gp = grad.data_ptr<T>();
    T* gzp = grad_z.data_ptr<T>();
    for (int64_t p = 0; p < l.rows(); ++p) {
      const T* row = zp + l.row_start(p);  // class c is row[c * l.inner]
      T* out = gzp + l.row_start(p);
      const int64_t t = tp[p];
      if (t == opts.ignore_index) {
        for (int64_t c = 0; c < l.n; ++c) out[c * l.inner] = T(0);
        continue;
      }
      const double g = double(opts.reduction == Reduction::None ? gp[p] : gp[0]) / scale;
      for (int64_t c = 0; c < l.n; ++c) {
        const T softmax_c = vec_math::exp_t<T>(static_cast<T>(double(row[c * l.inner]) - lse[p]));
        const double target_c = c == t ? 1.0 - eps : 0.0;
        out[c * l.inner] = static_cast<T>(g * (double(softmax_c) - eps / C - target_c));
      }
    }
  });
}

}  // namespace

struct CrossEntropyBackward final : Node {
  SavedTensor logits{this, "logits"}, target{this, "target"}, lse{this, "lse"};
  CrossEntropyOptions opts;
  double count;
  CrossEntropyBackward(CrossEntropyOptions o, double c) : opts(o), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor z = logits.get(), t = target.get();
    const int64_t cd = class_dim(z.shape());
    if (GradMode::enabled()) {  // recorded form: differentiable in z and grad
      Tensor dist =
          target_distribution(z.shape(), z.dtype(), t, opts.ignore_index, opts.label_smoothing);
      Tensor valid = valid_positions(t, opts.ignore_index, cd, z.dtype());
      Tensor g = class_position_grad(grad, opts.reduction, count, cd);
      return {mul(mul(sub(softmax(z, cd), dist), valid), g), Tensor()};
    }
    const RowLayout l = class_rows(z.shape());
    Tensor zc = z.detach().contiguous(), tc = t.contiguous(), gc = grad.contiguous();
    Tensor grad_z = empty(z.shape(), z.dtype());
    const double* lp = lse.get().data_ptr<double>();
    if (kernels::tuned_enabled()) {
      kernels::cross_entropy_backward(zc, tc, lp, gc, l, opts, count, grad_z);
    } else {
      cross_entropy_backward_reference(zc, tc, lp, gc, l, opts, count, grad_z);
    }
    return {grad_z, Tensor()};
  }
  const char* name() const override { return "CrossEntropyBackward"; }
};

struct CrossEntropyProbsBackward final : Node {
  SavedTensor logits{this, "logits"}, target{this, "target"};
  CrossEntropyOptions opts;
  double count;
  CrossEntropyProbsBackward(CrossEntropyOptions o, double c) : opts(o), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor z = logits.get(), p = target.get();
    const int64_t cd = class_dim(z.shape());
    const double eps = opts.label_smoothing, C = static_cast<double>(z.size(cd));
    Tensor g = class_position_grad(grad, opts.reduction, count, cd);
    Tensor grad_z, grad_p;
    if (needs_input_grad(0)) {
      Tensor q = add(mul(p, 1.0 - eps), eps / C);
      grad_z = mul(sub(mul(softmax(z, cd), sum(q, {cd}, true)), q), g);
    }
    if (needs_input_grad(1)) grad_p = mul(log_softmax(z, cd), mul(g, eps - 1.0));
    return {grad_z, grad_p};
  }
  const char* name() const override { return "CrossEntropyProbsBackward"; }
};

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts) {
  inspect::OpScope op_scope("cross_entropy", {&logits, &target});
  check_smoothing(opts.label_smoothing);
  const RowLayout l = checked_class_rows("cross_entropy", logits);
  const bool probs = is_floating(target.dtype());
  int64_t count;
  if (probs) {
    check_probability_target("cross_entropy", logits, target);
    count = l.rows();
  } else {
    count = check_index_target("cross_entropy", logits, target, opts.ignore_index);
  }
  Tensor z = logits.detach().contiguous(), t = target.detach().contiguous();
  std::vector<double> per(static_cast<size_t>(l.rows()), 0.0);
  Tensor lse = probs ? Tensor() : zeros({l.rows()}, kFloat64);  // per position, for the backward
  double* lsep = probs ? nullptr : lse.data_ptr<double>();
  if (kernels::tuned_enabled()) {
    kernels::cross_entropy_forward(z, t, l, opts, per, lsep);
  } else {
    cross_entropy_reference(z, t, l, opts, per, lsep);
  }
  Shape per_shape = logits.shape();
  per_shape.erase(per_shape.begin() + class_dim(logits.shape()));
  Tensor y = finish_loss(per, per_shape, logits.dtype(), opts.reduction, double(count));
  const double c = static_cast<double>(count);
  if (probs) {
    if (auto node = make_node<CrossEntropyProbsBackward>({&logits, &target}, opts, c)) {
      node->logits.save(logits);
      node->target.save(target);
      set_history(y, node);
    }
  } else if (auto node = make_node<CrossEntropyBackward>({&logits, &target}, opts, c)) {
    node->logits.save(logits);
    node->target.save(target);
    node->lse.save(lse);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// nll_loss
//   forward:   loss[p] = -x[p, t[p]]  (0 if ignored), then the reduction
//   backward:  grad_x[p, c] = -g[p] [c == t[p]]      saves target
struct NllLossBackward final : Node {
  SavedTensor target{this, "target"};
  NllLossOptions opts;
  double count;
  NllLossBackward(NllLossOptions o, double c) : opts(o), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const int64_t cd = class_dim(input_shapes[0]);
    Tensor dist =
        target_distribution(input_shapes[0], input_dtypes[0], target.get(), opts.ignore_index, 0.0);
    return {mul(dist, neg(class_position_grad(grad, opts.reduction, count, cd))), Tensor()};
  }
  const char* name() const override { return "NllLossBackward"; }
};

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& opts) {
  inspect::OpScope op_scope("nll_loss", {&log_probs, &target});
  const RowLayout l = checked_class_rows("nll_loss", log_probs);
  const int64_t count = check_index_target("nll_loss", log_probs, target, opts.ignore_index);
  Tensor x = log_probs.detach().contiguous(), t = target.contiguous();
  std::vector<double> per(static_cast<size_t>(l.rows()), 0.0);
  const int64_t* tp = t.data_ptr<int64_t>();
  dispatch_float(x.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    for (int64_t p = 0; p < l.rows(); ++p)
      if (tp[p] != opts.ignore_index)
        per[static_cast<size_t>(p)] = -double(xp[l.row_start(p) + tp[p] * l.inner]);
  });
  Shape per_shape = log_probs.shape();
  per_shape.erase(per_shape.begin() + class_dim(log_probs.shape()));
  Tensor y = finish_loss(per, per_shape, log_probs.dtype(), opts.reduction, double(count));
  if (auto node = make_node<NllLossBackward>({&log_probs, &target}, opts, double(count))) {
    node->target.save(target);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// Composite twin
Tensor cross_entropy_composite(const Tensor& logits, const Tensor& target,
                               const CrossEntropyOptions& opts) {
  inspect::OpScope op_scope("cross_entropy_composite", {&logits, &target});
  check_smoothing(opts.label_smoothing);
  const RowLayout l = checked_class_rows("cross_entropy", logits);
  const int64_t cd = class_dim(logits.shape());
  const double eps = opts.label_smoothing;
  Tensor lp = log_softmax_composite(logits, cd);
  if (is_floating(target.dtype())) {
    check_probability_target("cross_entropy", logits, target);
    Tensor q = add(mul(target, 1.0 - eps), eps / static_cast<double>(l.n));
    return reduce_composite(neg(sum(mul(q, lp), {cd})), opts.reduction,
                            static_cast<double>(l.rows()));
  }
  const int64_t count = check_index_target("cross_entropy", logits, target, opts.ignore_index);
  Tensor dist = target_distribution(logits.shape(), logits.dtype(), target, opts.ignore_index, eps);
  return reduce_composite(neg(sum(mul(dist, lp), {cd})), opts.reduction,
                          static_cast<double>(count));
}

}  // namespace nabla
