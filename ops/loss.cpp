// Regression and binary losses: mse_loss and binary_cross_entropy_with_logits, and their
// composite twins. Per-position losses and all sums are computed in double; the backwards are
// written with ops, so they are differentiable. The class-indexed losses are in
// ops/cross_entropy.cpp.
#include "nabla/ops/loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/loss_common.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/unary.h"

namespace nabla {
using loss_detail::check_pair;
using loss_detail::finish_loss;
using loss_detail::position_grad;
using loss_detail::reduce_composite;

// ----------------------------------------------------------------------------
// mse_loss
//   forward:   loss = (a - b)^2, then the reduction
//   backward:  grad_a = 2 g (a - b), grad_b = -grad_a      saves a and b
struct MseLossBackward final : Node {
  SavedTensor a{this, "a"}, b{this, "b"};
  Reduction reduction;
  double count;
  MseLossBackward(Reduction r, double c) : reduction(r), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor grad_a = mul(sub(a.get(), b.get()), mul(position_grad(grad, reduction, count), 2.0));
    return {needs_input_grad(0) ? grad_a : Tensor(), needs_input_grad(1) ? neg(grad_a) : Tensor()};
  }
  const char* name() const override { return "MseLossBackward"; }
};

Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction) {
  inspect::OpScope op_scope("mse_loss", {&a, &b});
  check_pair("mse_loss", a, b);
  Tensor ac = a.detach().contiguous(), bc = b.detach().contiguous();
  std::vector<double> per(static_cast<size_t>(a.numel()));
  dispatch_float(a.dtype(), "mse_loss", [&](auto tag) {
    using T = decltype(tag);
    const T *ap = ac.data_ptr<T>(), *bp = bc.data_ptr<T>();
    parallel_for(a.numel(), 2, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const double d = double(ap[i]) - double(bp[i]);
        per[static_cast<size_t>(i)] = d * d;
      }
    });
  });
  const double count = static_cast<double>(a.numel());
  Tensor y = finish_loss(per, a.shape(), a.dtype(), reduction, count);
  if (auto node = make_node<MseLossBackward>({&a, &b}, reduction, count)) {
    node->a.save(a);
    node->b.save(b);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// log_sigmoid (private: the BCE backward needs softplus(-x) = -log_sigmoid(x) with a derivative
// that is right at x = 0, where relu/abs-based forms get it wrong)
//   forward:   y = min(x, 0) - log1p(exp(-|x|))
//   backward:  grad_x = grad * sigmoid(-x)      saves x
struct LogSigmoidBackward final : Node {
  SavedTensor x{this, "x"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {mul(grad, sigmoid(neg(x.get())))};
  }
  const char* name() const override { return "LogSigmoidBackward"; }
};

namespace {
Tensor log_sigmoid(const Tensor& x) {
  Tensor y = kernels::map_float("log_sigmoid", x, [](auto v) {
    using T = decltype(v);
    return std::min(v, T(0)) - std::log1p(std::exp(-std::abs(v)));
  });
  if (auto node = make_node<LogSigmoidBackward>({&x})) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

void check_bce(const Tensor& x, const Tensor& t, const Tensor& pw) {
  check_pair("binary_cross_entropy_with_logits", x, t);
  if (!pw.defined()) return;
  kernels::check_same_dtype("binary_cross_entropy_with_logits", x, pw);
  if (broadcast_shapes("binary_cross_entropy_with_logits", pw.shape(), x.shape()) != x.shape())
    throw ShapeError(
        fmt::format("binary_cross_entropy_with_logits: pos_weight {} does not broadcast to {}",
                    shape_str(pw.shape()), shape_str(x.shape())));
}
}  // namespace

// ----------------------------------------------------------------------------
// binary_cross_entropy_with_logits
//   forward:   loss = (1 - t) x + L softplus(-x),  L = 1 + (pw - 1) t  (1 without pos_weight),
//              softplus(-x) = log1p(exp(-|x|)) + max(-x, 0), which never overflows
//   backward:  grad_x = g ((1 - t) - L sigmoid(-x))   (= g (sigmoid(x) - t) without pos_weight)
//              grad_t = g (-x + (pw - 1) softplus(-x)),  grad_pw = g t softplus(-x)
//              saves x, t and pos_weight
struct BceWithLogitsBackward final : Node {
  SavedTensor x{this, "x"}, t{this, "t"}, pw{this, "pw"};
  Reduction reduction;
  double count;
  BceWithLogitsBackward(Reduction r, double c) : reduction(r), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get(), tv = t.get(), pwv = pw.get();
    Tensor g = position_grad(grad, reduction, count);
    Tensor grad_x, grad_t, grad_pw;
    if (needs_input_grad(0)) {
      grad_x = pwv.defined()
                   ? mul(g, sub(1.0 - tv, mul(add(mul(sub(pwv, 1.0), tv), 1.0), sigmoid(neg(xv)))))
                   : mul(g, sub(sigmoid(xv), tv));
    }
    if (needs_input_grad(1) || needs_input_grad(2)) {
      Tensor sp = neg(log_sigmoid(xv));  // softplus(-x)
      if (needs_input_grad(1))
        grad_t = pwv.defined() ? mul(g, sub(mul(sub(pwv, 1.0), sp), xv)) : mul(g, neg(xv));
      if (needs_input_grad(2)) grad_pw = mul(g, mul(tv, sp));
    }
    return {grad_x, grad_t, grad_pw};
  }
  const char* name() const override { return "BceWithLogitsBackward"; }
};

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction, const Tensor& pos_weight) {
  inspect::OpScope op_scope("binary_cross_entropy_with_logits", {&logits, &target, &pos_weight});
  check_bce(logits, target, pos_weight);
  Tensor xc = logits.detach().contiguous(), tc = target.detach().contiguous();
  Tensor pwc =
      pos_weight.defined() ? pos_weight.detach().expand(logits.shape()).contiguous() : Tensor();
  std::vector<double> per(static_cast<size_t>(logits.numel()));
  dispatch_float(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T *xp = xc.data_ptr<T>(), *tp = tc.data_ptr<T>();
    const T* wp = pwc.defined() ? pwc.data_ptr<T>() : nullptr;
    parallel_for(logits.numel(), 16, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const double x = double(xp[i]), t = double(tp[i]);
        const double sp = std::log1p(std::exp(-std::abs(x))) + std::max(-x, 0.0);
        const double L = wp ? 1.0 + (double(wp[i]) - 1.0) * t : 1.0;
        per[static_cast<size_t>(i)] = (1.0 - t) * x + L * sp;
      }
    });
  });
  const double count = static_cast<double>(logits.numel());
  Tensor y = finish_loss(per, logits.shape(), logits.dtype(), reduction, count);
  if (auto node =
          make_node<BceWithLogitsBackward>({&logits, &target, &pos_weight}, reduction, count)) {
    node->x.save(logits);
    node->t.save(target);
    node->pw.save(pos_weight);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// Composite twins
Tensor mse_loss_composite(const Tensor& a, const Tensor& b, Reduction reduction) {
  inspect::OpScope op_scope("mse_loss_composite", {&a, &b});
  check_pair("mse_loss", a, b);
  Tensor d = sub(a, b);
  return reduce_composite(mul(d, d), reduction, static_cast<double>(a.numel()));
}

// NOTE: relu and abs have derivative 0 at 0, so at exactly x = 0 this twin's gradient misses the
// -L/2 term that the fused op (through log_sigmoid) gets right; compare them away from 0.
Tensor binary_cross_entropy_with_logits_composite(const Tensor& logits, const Tensor& target,
                                                  Reduction reduction, const Tensor& pos_weight) {
  inspect::OpScope op_scope("binary_cross_entropy_with_logits_composite",
                            {&logits, &target, &pos_weight});
  check_bce(logits, target, pos_weight);
  Tensor sp = add(relu(neg(logits)), log(add(exp(neg(abs(logits))), 1.0)));  // softplus(-x)
  Tensor L = pos_weight.defined() ? add(mul(sub(pos_weight, 1.0), target), 1.0)
                                  : ones_like(logits.detach());
  return reduce_composite(add(mul(1.0 - target, logits), mul(L, sp)), reduction,
                          static_cast<double>(logits.numel()));
}

}  // namespace nabla
