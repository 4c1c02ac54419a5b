// bfloat16 and float16 in ops: the one upcast-compute-downcast rule. An op that accepts them
// starts with
//     if (reduced::any(x)) return reduced::in_float32("exp", [](const Tensor& w) { ... }, x);
// so its float32 kernel runs on float32 copies and the result is rounded once to the inputs'
// promoted dtype (promote_types, core/dtype.h). The copies are recorded `to()`s, so autograd
// needs nothing more: the float32 gradient is rounded once on its way back to a bfloat16 input
// (ToBackward), and a bfloat16 tensor's gradient is bfloat16. This is PyTorch's "opmath" rule for
// reduced floats on CPU (compute in float, store in the storage type). Ops without the line
// reach dispatch_float/dispatch_numeric, whose DTypeError names the op and says .to(kFloat32).
#pragma once
#include <array>
#include <utility>

#include "nabla/core/tensor.h"

namespace nabla::reduced {

// True when a defined operand is bfloat16 or float16.
template <class... Ts>
bool any(const Ts&... xs) {
  return ((xs.defined() && is_reduced_float(xs.dtype())) || ...);
}

// The dtype of f's result: the operands' promoted dtype (undefined operands skipped).
template <class... Ts>
DType result_dtype(const char* op, const Ts&... xs) {
  bool first = true;
  DType result = kFloat32;
  auto fold = [&](const Tensor& t) {
    if (!t.defined()) return;
    result = first ? t.dtype() : promote_types(op, result, t.dtype());
    first = false;
  };
  (fold(xs), ...);
  return result;
}

// Calls f on the operands with every bfloat16/float16 one converted to the compute dtype
// (float32, or float64 when the promoted dtype is float64) and rounds f's floating result once
// to the promoted dtype. Non-floating results (comparisons) are returned as they are.
template <class F, class... Ts>
Tensor in_float32(const char* op, F&& f, const Ts&... xs) {
  const DType result = result_dtype(op, xs...);
  const DType compute = is_reduced_float(result) ? kFloat32 : result;
  // One copy per distinct tensor: a tensor passed twice (mul(x, x)) has one widened twin, so its
  // two gradients are summed in float32 and rounded once.
  std::array<std::pair<const TensorImpl*, Tensor>, sizeof...(Ts)> widened;
  size_t count = 0;
  auto widen = [&](const Tensor& t) -> Tensor {
    if (!t.defined() || !is_reduced_float(t.dtype())) return t;
    for (size_t i = 0; i < count; ++i)
      if (widened[i].first == t.impl_ptr().get()) return widened[i].second;
    widened[count] = {t.impl_ptr().get(), t.to(compute)};
    return widened[count++].second;
  };
  Tensor y = f(widen(xs)...);
  return is_reduced_float(result) && is_floating(y.dtype()) ? y.to(result) : y;
}

}  // namespace nabla::reduced
