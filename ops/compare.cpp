// Comparisons and logical ops. Outputs are bool and carry no autograd history.
#include "nabla/ops/compare.h"

#include "nabla/core/inspect/cuts.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/reduced_float.h"

namespace nabla {
namespace {

// y = f(a, b) elementwise over the broadcast shape, for operands of element type T.
template <class T, class F>
Tensor compare_as(const char* op, const Tensor& a, const Tensor& b, F&& f) {
  inspect::note_non_differentiable(op, {&a, &b});
  Tensor y = empty(broadcast_shapes(op, a.shape(), b.shape()), kBool);
  std::array<Shape, 3> st = {y.strides(), broadcast_strides(a.shape(), a.strides(), y.shape()),
                             broadcast_strides(b.shape(), b.strides(), y.shape())};
  bool* yp = y.data_ptr<bool>();
  const T* ap = a.data_ptr<T>();
  const T* bp = b.data_ptr<T>();
  strided_for_each<3>(
      y.shape(), st, 1,
      [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
        bool* yo = yp + o[0];
        const T* ao = ap + o[1];
        const T* bo = bp + o[2];
        // Unit strides, and a scalar b (a mask like x > 0), as their own loops: the compiler
        // vectorises them, not the general one. Bool operands (the logical ops) are read as
        // bytes: GCC 12 does not vectorise loads of bool.
        using Load = std::conditional_t<std::is_same_v<T, bool>, unsigned char, T>;
        const auto* al = reinterpret_cast<const Load*>(ao);
        const auto* bl = reinterpret_cast<const Load*>(bo);
        auto value = [](Load v) {
          if constexpr (std::is_same_v<T, bool>) {
            return v != 0;
          } else {
            return v;
          }
        };
        if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
          const T bv = *bo;
          for (int64_t i = 0; i < n; ++i) yo[i] = f(value(al[i]), bv);
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
          for (int64_t i = 0; i < n; ++i) yo[i] = f(value(al[i]), value(bl[i]));
        } else {
          for (int64_t i = 0; i < n; ++i) yo[i * s[0]] = f(ao[i * s[1]], bo[i * s[2]]);
        }
      });
  return y;
}

template <class F>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, F&& f) {
  // bfloat16/float16 with another float: compared in the promoted dtype (the upcast is exact).
  if (a.dtype() != b.dtype() && reduced::any(a, b))
    return reduced::in_float32(
        op, [&](const Tensor& a32, const Tensor& b32) { return compare(op, a32, b32, f); }, a, b);
  kernels::check_same_dtype(op, a, b);
  return dispatch_all(a.dtype(), [&](auto tag) { return compare_as<decltype(tag)>(op, a, b, f); });
}

Tensor scalar_for(const Tensor& a, double b) { return scalar_tensor(b, a.dtype()); }

void check_bool(const char* op, const Tensor& t) {
  if (t.dtype() != kBool)
    throw DTypeError(fmt::format("{}: expects bool tensors, got {} {}", op, dtype_name(t.dtype()),
                                 shape_str(t.shape())));
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("eq", {&a, &b});
  return compare("eq", a, b, [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("ne", {&a, &b});
  return compare("ne", a, b, [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("lt", {&a, &b});
  return compare("lt", a, b, [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("le", {&a, &b});
  return compare("le", a, b, [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("gt", {&a, &b});
  return compare("gt", a, b, [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("ge", {&a, &b});
  return compare("ge", a, b, [](auto x, auto y) { return x >= y; });
}
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_for(a, b)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_for(a, b)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_for(a, b)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_for(a, b)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_for(a, b)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_for(a, b)); }

Tensor logical_and(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("logical_and", {&a, &b});
  check_bool("logical_and", a);
  check_bool("logical_and", b);
  return compare_as<bool>("logical_and", a, b, [](auto x, auto y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("logical_or", {&a, &b});
  check_bool("logical_or", a);
  check_bool("logical_or", b);
  return compare_as<bool>("logical_or", a, b, [](auto x, auto y) { return x || y; });
}
Tensor logical_not(const Tensor& a) {
  inspect::OpScope op_scope("logical_not", {&a});
  check_bool("logical_not", a);
  return compare_as<bool>("logical_not", a, scalar_tensor(0, kBool),
                          [](auto x, auto) { return !x; });
}

}  // namespace nabla
