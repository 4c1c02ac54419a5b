// Shared by the loss files (ops/cross_entropy.cpp, ops/loss.cpp): the argument check of paired
// inputs and the reduction step, for the fused ops (per-position losses in double) and for the
// composite twins (ops). Internal: not part of nabla.h.
#pragma once
#include <fmt/format.h>

#include <vector>

#include "nabla/core/error.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/loss.h"
#include "nabla/ops/reduce.h"

namespace nabla::loss_detail {

// a and b: one floating dtype and one shape.
inline void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  kernels::check_same_dtype(op, a, b);
  if (!is_floating(a.dtype()))
    throw DTypeError(fmt::format("{}: expects float32 or float64, got {} {}", op,
                                 dtype_name(a.dtype()), shape_str(a.shape())));
  if (a.shape() != b.shape())
    throw ShapeError(fmt::format(
        "{}: shapes {} and {} must match (the loss does not broadcast; reshape one, e.g. "
        "squeeze(-1) on an (N, 1) prediction)",
        op, shape_str(a.shape()), shape_str(b.shape())));
}

// Per-position losses (double) -> the op's output: the losses themselves in `shape` (None), their
// sum, or their sum / count (Mean; 0 / 0 = NaN when nothing counts, as in PyTorch).
inline Tensor finish_loss(const std::vector<double>& per, const Shape& shape, DType dt, Reduction r,
                          double count) {
  if (r == Reduction::None) {
    Tensor y = empty(shape, dt);
    dispatch_float(dt, "loss", [&](auto tag) {
      using T = decltype(tag);
      T* yp = y.data_ptr<T>();
      for (size_t i = 0; i < per.size(); ++i) yp[i] = static_cast<T>(per[i]);
    });
    return y;
  }
  double s = 0;
  for (double v : per) s += v;
  return scalar_tensor(r == Reduction::Mean ? s / count : s, dt);
}

// The gradient reaching each position's loss, broadcastable to the per-position shape.
inline Tensor position_grad(const Tensor& grad, Reduction r, double count) {
  return r == Reduction::Mean ? div(grad, count) : grad;
}

// The composite twins' reduction, with ops.
inline Tensor reduce_composite(const Tensor& per, Reduction r, double count) {
  if (r == Reduction::None) return per;
  return r == Reduction::Sum ? sum(per) : div(sum(per), count);
}

}  // namespace nabla::loss_detail
