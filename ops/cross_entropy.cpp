// cross_entropy (fused with log_softmax) and nll_loss: the class-indexed losses. Inputs
// (N, C, d1, ...) are viewed as (outer = N, C, inner = d1 * ...); an unbatched (C,) input is
// (1, C, 1). Per-position losses and all sums are computed in double. cross_entropy with index
// targets has a fused backward kernel (ops under create_graph); nll_loss's backward is written
// with ops, so both are differentiable.
#include "ops/loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"
#include "ops/kernel_helpers.h"
#include "ops/loss_common.h"
#include "ops/lse_kernels.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/unary.h"
#include "ops/vec_math.h"

namespace nabla {
using loss_detail::check_pair;
using loss_detail::finish_loss;
using loss_detail::position_grad;
using loss_detail::reduce_composite;
namespace {

struct ClassLayout {
  int64_t outer = 1, C = 1, inner = 1;
  int64_t dim = 0;  // the class dim: 1, or 0 for an unbatched (C,) input
};

ClassLayout layout_of(const Shape& s) {
  ClassLayout l;
  l.dim = s.size() == 1 ? 0 : 1;
  l.outer = l.dim == 1 ? s[0] : 1;
  l.C = s[static_cast<size_t>(l.dim)];
  for (size_t d = 2; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

ClassLayout class_layout(const char* op, const Tensor& input) {
  if (!is_floating(input.dtype()))
    throw DTypeError(fmt::format("{}: input must be float32 or float64, got {} {}", op,
                                 dtype_name(input.dtype()), shape_str(input.shape())));
  if (input.dim() == 0)
    throw ShapeError(fmt::format("{}: input must be (C,), (N, C) or (N, C, d1, ...), got ()", op));
  return layout_of(input.shape());
}

// Checks an int64 index target (input's shape without the class dim) and returns how many
// targets are not ignore_index. Every other index must lie in [0, C).
int64_t check_index_target(const char* op, const Tensor& input, const Tensor& target,
                           int64_t ignore_index) {
  const ClassLayout l = class_layout(op, input);
  if (target.dtype() != kInt64)
    throw DTypeError(fmt::format("{}: target must be int64 class indices, got {} {}", op,
                                 dtype_name(target.dtype()), shape_str(target.shape())));
  Shape expected = input.shape();
  expected.erase(expected.begin() + l.dim);
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
    if (tp[p] < 0 || tp[p] >= l.C)
      throw ValueError(
          fmt::format("{}: target index {} is out of range for {} classes", op, tp[p], l.C));
    ++count;
  }
  return count;
}

// The same, with the class dim restored (size 1) so it broadcasts against the input.
Tensor class_position_grad(const Tensor& grad, Reduction r, double count, int64_t class_dim) {
  Tensor g = position_grad(grad, r, count);
  return r == Reduction::None ? g.unsqueeze(class_dim) : g;
}
// Index targets as a distribution in input's shape: (1 - eps) at the target class plus eps / C
// everywhere, and all zeros at ignored positions. Constant data (no autograd).
Tensor target_distribution(const Shape& in_shape, DType dt, const Tensor& target,
                           int64_t ignore_index, double eps) {
  Tensor dist = zeros(in_shape, dt);
  const ClassLayout l = layout_of(in_shape);
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  dispatch_float(dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    T* dp = dist.data_ptr<T>();
    const int64_t P = t.numel();
    for (int64_t p = 0; p < P; ++p) {
      if (tp[p] == ignore_index) continue;
      T* row = dp + (p / l.inner) * l.C * l.inner + p % l.inner;
      for (int64_t c = 0; c < l.C; ++c) row[c * l.inner] = static_cast<T>(eps / double(l.C));
      row[tp[p] * l.inner] += static_cast<T>(1.0 - eps);
    }
  });
  return dist;
}

// 1 at counted positions, 0 at ignored ones, shaped (N, 1, d1, ...) in dtype dt.
Tensor valid_positions(const Tensor& target, int64_t ignore_index, int64_t class_dim, DType dt) {
  Tensor t = target.contiguous(), v = empty(target.shape(), dt);
  const int64_t* tp = t.data_ptr<int64_t>();
  dispatch_float(dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    T* vp = v.data_ptr<T>();
    const int64_t P = t.numel();
    for (int64_t p = 0; p < P; ++p) vp[p] = tp[p] == ignore_index ? T(0) : T(1);
  });
  return v.unsqueeze(class_dim);
}

void check_smoothing(double eps) {
  if (!(eps >= 0.0 && eps <= 1.0))
    throw ValueError(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", eps));
}

// The fused cross_entropy backward's constants: grad_z = g (softmax - (1 - eps) [c == t] - eps / C)
// with g = grad / scale.
struct CrossEntropyGrad {
  double smooth;  // eps / C
  double hit;     // 1 - eps
  double scale;   // count (Mean reduction) or 1
  int64_t ignore_index;
};

// a if keep, else +0.0, by masking a's bits. A select between computed floating-point values
// can be compiled as a branch around the computation (which stops vectorisation); a mask cannot.
template <class T>
T zero_unless(bool keep, T a) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  return std::bit_cast<T>(std::bit_cast<Bits>(a) & (keep ? ~Bits{0} : Bits{0}));
}

// One position's row of C contiguous classes (inner == 1). The exps go through `out` first: in
// one loop with the double arithmetic they do not vectorise. Subtracting 0.0 off target is exact,
// so subtracting zero_unless(c == target, hit) gives what `if (c == target) v -= hit` gave.
template <class T>
void cross_entropy_grad_row(const T* z, T* out, int64_t C, double lse, int64_t target, double g,
                            const CrossEntropyGrad& k) {
  const double smooth = k.smooth, hit = k.hit;  // locals: stores to out cannot change them
#pragma omp simd
  for (int64_t c = 0; c < C; ++c)
    out[c] = vec_math::exp_t<T>(static_cast<T>(static_cast<double>(z[c]) - lse));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const double v = static_cast<double>(out[c]) - smooth - zero_unless(c == target, hit);
    out[c] = static_cast<T>(g * v);
  }
}

// Class c of n consecutive positions of one outer index (inner > 1): z, out, lse, target and
// (PerPos) grad are all contiguous along the positions, which run in the SIMD lanes. Without
// PerPos every position's g is g_all.
template <class T, bool PerPos>
void cross_entropy_grad_class(const T* z, T* out, int64_t n, int64_t c, const double* lse,
                              const int64_t* target, const T* grad, double g_all,
                              const CrossEntropyGrad& k) {
  const double smooth = k.smooth, hit = k.hit, scale = k.scale;
  const int64_t ignore_index = k.ignore_index;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = vec_math::exp_t<T>(static_cast<T>(static_cast<double>(z[i]) - lse[i]));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double g = PerPos ? static_cast<double>(grad[i]) / scale : g_all;
    const double v = static_cast<double>(out[i]) - smooth - zero_unless(c == target[i], hit);
    out[i] = zero_unless(target[i] != ignore_index, static_cast<T>(g * v));
  }
}

}  // namespace

// ----------------------------------------------------------------------------
// cross_entropy, index targets (fused log_softmax + NLL with label smoothing eps)
//   forward:   loss[p] = lse[p] - (1 - eps) z[p, t] - eps / C sum_c z[p, c]   (0 if ignored)
//              lse[p] = log sum_c exp(z[p, c]); then the reduction
//   backward:  grad_z[p, c] = g[p] (softmax(z)[p, c] - (1 - eps) [c == t] - eps / C)
//              (0 at ignored positions)     saves logits, target and lse (float64, per position)
struct CrossEntropyBackward final : Node {
  SavedTensor logits{this}, target{this}, lse{this};
  CrossEntropyOptions opts;
  double count;
  CrossEntropyBackward(CrossEntropyOptions o, double c) : opts(o), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor z = logits.get(), t = target.get();
    const int64_t cd = z.dim() == 1 ? 0 : 1;
    if (GradMode::enabled()) {  // recorded form: differentiable in z and grad
      Tensor dist =
          target_distribution(z.shape(), z.dtype(), t, opts.ignore_index, opts.label_smoothing);
      Tensor valid = valid_positions(t, opts.ignore_index, cd, z.dtype());
      Tensor g = class_position_grad(grad, opts.reduction, count, cd);
      return {mul(mul(sub(softmax(z, cd), dist), valid), g), Tensor()};
    }
    const ClassLayout l = class_layout("cross_entropy", z);
    Tensor zc = z.detach().contiguous(), tc = t.contiguous(), gc = grad.contiguous();
    Tensor grad_z = empty(z.shape(), z.dtype());
    const double* lp = lse.get().data_ptr<double>();
    const int64_t* tp = tc.data_ptr<int64_t>();
    const bool per_pos = opts.reduction == Reduction::None;
    const double eps = opts.label_smoothing, scale = opts.reduction == Reduction::Mean ? count : 1;
    const CrossEntropyGrad k{eps / double(l.C), 1.0 - eps, scale, opts.ignore_index};
    dispatch_float(z.dtype(), "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      const T* zp = zc.data_ptr<T>();
      const T* gp = gc.data_ptr<T>();
      T* op = grad_z.data_ptr<T>();
      if (l.inner == 1) {  // one contiguous row per position
        parallel_for(l.outer, l.C * 4, [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            T* out = op + p * l.C;
            if (tp[p] == opts.ignore_index) {
              std::fill(out, out + l.C, T(0));
              continue;
            }
            const double g = (per_pos ? double(gp[p]) : double(gp[0])) / scale;
            cross_entropy_grad_row<T>(zp + p * l.C, out, l.C, lp[p], tp[p], g, k);
          }
        });
        return;
      }
      // One run of `inner` positions per (outer, class) pair.
      parallel_for(l.outer * l.C, l.inner * 4, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const int64_t pos = (r / l.C) * l.inner, off = r * l.inner, c = r % l.C;
          if (per_pos) {
            cross_entropy_grad_class<T, true>(zp + off, op + off, l.inner, c, lp + pos, tp + pos,
                                              gp + pos, 0.0, k);
          } else {
            cross_entropy_grad_class<T, false>(zp + off, op + off, l.inner, c, lp + pos, tp + pos,
                                               nullptr, double(gp[0]) / scale, k);
          }
        }
      });
    });
    return {grad_z, Tensor()};
  }
  const char* name() const override { return "CrossEntropyBackward"; }
};

// ----------------------------------------------------------------------------
// cross_entropy, probability targets p (same shape as the logits z)
//   forward:   loss[pos] = sum_c q[c] (lse - z[c]),  q = (1 - eps) p + eps / C
//   backward:  grad_z = g (softmax(z) sum_c q - q),  grad_p = -g (1 - eps) log_softmax(z)
//              (written with the fused softmax ops)      saves logits and target
struct CrossEntropyProbsBackward final : Node {
  SavedTensor logits{this}, target{this};
  CrossEntropyOptions opts;
  double count;
  CrossEntropyProbsBackward(CrossEntropyOptions o, double c) : opts(o), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor z = logits.get(), p = target.get();
    const int64_t cd = z.dim() == 1 ? 0 : 1;
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
  check_smoothing(opts.label_smoothing);
  const ClassLayout l = class_layout("cross_entropy", logits);
  const bool probs = is_floating(target.dtype());
  int64_t count;
  if (probs) {
    kernels::check_same_dtype("cross_entropy", logits, target);
    if (target.shape() != logits.shape())
      throw ShapeError(
          fmt::format("cross_entropy: probability target {} must have the logits' shape {}",
                      shape_str(target.shape()), shape_str(logits.shape())));
    count = l.outer * l.inner;
  } else {
    count = check_index_target("cross_entropy", logits, target, opts.ignore_index);
  }
  Tensor z = logits.detach().contiguous(), t = target.detach().contiguous();
  const int64_t P = l.outer * l.inner;
  std::vector<double> per(static_cast<size_t>(P), 0.0);
  Tensor lse = probs ? Tensor() : zeros({P}, kFloat64);  // per position, for the backward
  double* lsep = probs ? nullptr : lse.data_ptr<double>();
  const int64_t* tip = probs ? nullptr : t.data_ptr<int64_t>();
  const double eps = opts.label_smoothing, C = static_cast<double>(l.C);
  dispatch_float(z.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    const T* qp = probs ? t.data_ptr<T>() : nullptr;
    // Position p's loss from its row's lse (and, with smoothing, the sum of its logits).
    auto loss_at = [&](int64_t p, double lse_p, double zsum) {
      const int64_t base = (p / l.inner) * l.C * l.inner + p % l.inner;
      const T* row = zp + base;
      if (probs) {
        double acc = 0;
        for (int64_t c = 0; c < l.C; ++c) {
          const int64_t k = c * l.inner;
          acc += ((1.0 - eps) * double(qp[base + k]) + eps / C) * (lse_p - double(row[k]));
        }
        per[static_cast<size_t>(p)] = acc;
        return;
      }
      const int64_t tc = tip[p];
      if (tc == opts.ignore_index) return;
      lsep[p] = lse_p;
      per[static_cast<size_t>(p)] =
          lsep[p] - (1.0 - eps) * double(row[tc * l.inner]) - eps / C * zsum;
    };
    if (!probs && eps != 0.0) {
      kernels::for_each_row_lse<T, true>(zp, l.outer, l.C, l.inner, loss_at);
    } else {
      kernels::for_each_row_lse<T, false>(zp, l.outer, l.C, l.inner, loss_at);
    }
  });
  Shape per_shape = logits.shape();
  per_shape.erase(per_shape.begin() + l.dim);
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
  SavedTensor target{this};
  NllLossOptions opts;
  double count;
  NllLossBackward(NllLossOptions o, double c) : opts(o), count(c) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const int64_t cd = input_shapes[0].size() == 1 ? 0 : 1;
    Tensor dist =
        target_distribution(input_shapes[0], input_dtypes[0], target.get(), opts.ignore_index, 0.0);
    return {mul(dist, neg(class_position_grad(grad, opts.reduction, count, cd))), Tensor()};
  }
  const char* name() const override { return "NllLossBackward"; }
};

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& opts) {
  const ClassLayout l = class_layout("nll_loss", log_probs);
  const int64_t count = check_index_target("nll_loss", log_probs, target, opts.ignore_index);
  Tensor x = log_probs.detach().contiguous(), t = target.contiguous();
  const int64_t P = l.outer * l.inner;
  std::vector<double> per(static_cast<size_t>(P), 0.0);
  const int64_t* tp = t.data_ptr<int64_t>();
  dispatch_float(x.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    for (int64_t p = 0; p < P; ++p)
      if (tp[p] != opts.ignore_index)
        per[static_cast<size_t>(p)] =
            -double(xp[((p / l.inner) * l.C + tp[p]) * l.inner + p % l.inner]);
  });
  Shape per_shape = log_probs.shape();
  per_shape.erase(per_shape.begin() + l.dim);
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
  check_smoothing(opts.label_smoothing);
  const ClassLayout l = class_layout("cross_entropy", logits);
  const double eps = opts.label_smoothing;
  Tensor lp = log_softmax_composite(logits, l.dim);
  if (is_floating(target.dtype())) {
    check_pair("cross_entropy", logits, target);
    Tensor q = add(mul(target, 1.0 - eps), eps / static_cast<double>(l.C));
    return reduce_composite(neg(sum(mul(q, lp), {l.dim})), opts.reduction,
                            static_cast<double>(l.outer * l.inner));
  }
  const int64_t count = check_index_target("cross_entropy", logits, target, opts.ignore_index);
  Tensor dist = target_distribution(logits.shape(), logits.dtype(), target, opts.ignore_index, eps);
  return reduce_composite(neg(sum(mul(dist, lp), {l.dim})), opts.reduction,
                          static_cast<double>(count));
}

}  // namespace nabla
