// Divergence losses: kl_div (torch.nn.functional.kl_div), its composite twin, and the
// distillation loss built on it. Per-position losses and sums are computed in double; the
// backward is written with ops, so it is differentiable.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/loss.h"
#include "nabla/ops/loss_common.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/softmax.h"
#include "nabla/ops/unary.h"

namespace nabla {
using loss_detail::finish_loss;
using loss_detail::position_grad;
using loss_detail::reduce_composite;

namespace {

// input and target: one floating dtype, shapes that broadcast. Returns the broadcast shape.
Shape check_kl_div(const char* op, const Tensor& input, const Tensor& target) {
  kernels::check_same_dtype(op, input, target);
  if (!is_floating(input.dtype()))
    throw DTypeError(fmt::format("{}: expects float32 or float64, got {} {}", op,
                                 dtype_name(input.dtype()), shape_str(input.shape())));
  return broadcast_shapes(op, input.shape(), target.shape());
}

// The divisor of Mean / BatchMean as a Reduction for the shared helpers (BatchMean is Mean with
// input.size(0) for the count; a 0-d input makes it Sum, as in PyTorch).
Reduction base_reduction(KlDivReduction r, const Tensor& input) {
  switch (r) {
    case KlDivReduction::None:
      return Reduction::None;
    case KlDivReduction::Sum:
      return Reduction::Sum;
    case KlDivReduction::Mean:
      return Reduction::Mean;
    case KlDivReduction::BatchMean:
      return input.dim() == 0 ? Reduction::Sum : Reduction::Mean;
  }
  return Reduction::Mean;
}

double reduction_count(KlDivReduction r, const Tensor& input, const Shape& shape) {
  if (r == KlDivReduction::BatchMean)
    return input.dim() == 0 ? 1.0 : static_cast<double>(input.size(0));
  return static_cast<double>(shape_numel(shape));
}

}  // namespace

// ----------------------------------------------------------------------------
// kl_div
//   forward:   loss = t (log t - x), 0 where t == 0          (log_target: e^t (t - x))
//              over the broadcast shape, then the reduction
//   backward:  grad_x = -g t,  grad_t = g (log t + 1 - x)    (log_target: -g e^t and
//              g e^t (t - x + 1)); expanded to the broadcast shape, the engine sums them back
//              saves x and t
struct KlDivBackward final : Node {
  SavedTensor x{this, "input"}, t{this, "target"};
  Reduction reduction;
  double count;
  bool log_target;
  Shape shape;
  KlDivBackward(Reduction r, double c, bool lt, Shape s)
      : reduction(r), count(c), log_target(lt), shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get(), tv = t.get();
    Tensor g = position_grad(grad, reduction, count);
    Tensor p = log_target ? exp(tv) : tv;  // the target probabilities
    Tensor grad_x, grad_t;
    if (needs_input_grad(0)) grad_x = neg(mul(g, p)).expand(shape);
    if (needs_input_grad(1)) {
      Tensor inner = log_target ? add(sub(tv, xv), 1.0) : add(sub(log(tv), xv), 1.0);
      grad_t = log_target ? mul(g, mul(p, inner)).expand(shape) : mul(g, inner).expand(shape);
    }
    return {grad_x, grad_t};
  }
  const char* name() const override { return "KlDivBackward"; }
};

Tensor kl_div(const Tensor& input, const Tensor& target, const KlDivOptions& opts) {
  inspect::OpScope op_scope("kl_div", {&input, &target});
  const Shape shape = check_kl_div("kl_div", input, target);
  Tensor xc = input.detach().expand(shape).contiguous();
  Tensor tc = target.detach().expand(shape).contiguous();
  const int64_t n = shape_numel(shape);
  std::vector<double> per(static_cast<size_t>(n));
  const bool log_target = opts.log_target;
  dispatch_float(input.dtype(), "kl_div", [&](auto tag) {
    using T = decltype(tag);
    const T *xp = xc.data_ptr<T>(), *tp = tc.data_ptr<T>();
    parallel_for(n, 16, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const double x = double(xp[i]), t = double(tp[i]);
        double v;
        if (log_target)
          v = std::exp(t) * (t - x);
        else
          v = t == 0.0 ? 0.0 : t * (std::log(t) - x);  // xlogy: 0 log 0 = 0
        per[static_cast<size_t>(i)] = v;
      }
    });
  });
  const Reduction red = base_reduction(opts.reduction, input);
  const double count = reduction_count(opts.reduction, input, shape);
  Tensor y = finish_loss(per, shape, input.dtype(), red, count);
  if (auto node = make_node<KlDivBackward>({&input, &target}, red, count, log_target, shape)) {
    node->x.save(input);
    node->t.save(target);
    set_history(y, node);
  }
  return y;
}

Tensor kl_div_composite(const Tensor& input, const Tensor& target, const KlDivOptions& opts) {
  inspect::OpScope op_scope("kl_div_composite", {&input, &target});
  const Shape shape = check_kl_div("kl_div", input, target);
  Tensor per = opts.log_target ? mul(exp(target), sub(target, input))
                               : where(gt(target, 0.0), mul(target, sub(log(target), input)), 0.0);
  per = per.expand(shape);
  return reduce_composite(per, base_reduction(opts.reduction, input),
                          reduction_count(opts.reduction, input, shape));
}

// ----------------------------------------------------------------------------
// distillation_loss (Hinton et al. 2015, arXiv:1503.02531, section 2)
Tensor distillation_loss(const Tensor& student_logits, const Tensor& teacher_logits,
                         const Tensor& labels, double temperature, double alpha) {
  inspect::OpScope op_scope("distillation_loss", {&student_logits, &teacher_logits, &labels});
  const char* op = "distillation_loss";
  if (!(temperature > 0.0) || !std::isfinite(temperature))
    throw ValueError(
        fmt::format("{}: temperature must be finite and > 0, got {}", op, temperature));
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw ValueError(fmt::format("{}: alpha must be in [0, 1], got {}", op, alpha));
  if (student_logits.dim() != 2 || student_logits.shape() != teacher_logits.shape())
    throw ShapeError(fmt::format(
        "{}: student and teacher logits must both be (N, C) of one shape, got {} and {}", op,
        shape_str(student_logits.shape()), shape_str(teacher_logits.shape())));
  kernels::check_same_dtype(op, student_logits, teacher_logits);
  const DType dt = student_logits.dtype();
  if (dt != kFloat32 && dt != kFloat64)
    throw DTypeError(fmt::format("{}: logits must be float32 or float64, got {} {}", op,
                                 dtype_name(dt), shape_str(student_logits.shape())));
  Tensor log_s = log_softmax(div(student_logits, temperature), -1);
  Tensor log_t = log_softmax(div(teacher_logits, temperature), -1);
  // log_target: a teacher probability that underflows to 0 stays exact in log space.
  Tensor soft = kl_div(log_s, log_t, {.reduction = KlDivReduction::BatchMean, .log_target = true});
  Tensor hard = cross_entropy(student_logits, labels);
  return add(mul(soft, alpha * temperature * temperature), mul(hard, 1.0 - alpha));
}

}  // namespace nabla
