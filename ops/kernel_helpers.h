// Elementwise kernel helpers shared by every elementwise op family: they check dtypes, broadcast,
// allocate the output and run a scalar functor over the strided loop. No autograd here.
#pragma once
#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
#include "nabla/core/strided_loop.h"
#include "nabla/core/tensor.h"

namespace nabla::kernels {

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw DTypeError(fmt::format("{}: dtype mismatch, {} {} vs {} {}", op, dtype_name(a.dtype()),
                                 shape_str(a.shape()), dtype_name(b.dtype()),
                                 shape_str(b.shape())));
}

// y[i] = f(x[i]); FloatOnly picks the dtype set (float32/64, or also int64).
template <bool FloatOnly, class F>
Tensor map_unary(const char* op, const Tensor& x, F&& f) {
  Tensor y = empty(x.shape(), x.dtype());
  auto body = [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    std::array<Shape, 2> st = {y.strides(), x.strides()};
    strided_for_each<2>(
        x.shape(), st, 4,
        [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
          T* yo = yp + o[0];
          const T* xo = xp + o[1];
          if (s[1] == 1) {
            for (int64_t i = 0; i < n; ++i) yo[i] = f(xo[i]);
          } else {
            for (int64_t i = 0; i < n; ++i) yo[i] = f(xo[i * s[1]]);
          }
        });
  };
  if constexpr (FloatOnly) {
    dispatch_float(x.dtype(), op, body);
  } else {
    dispatch_numeric(x.dtype(), op, body);
  }
  return y;
}

template <class F>
Tensor map_float(const char* op, const Tensor& x, F&& f) {
  return map_unary<true>(op, x, std::forward<F>(f));
}

// y = f(a, b) with broadcasting. `dispatch` picks the dtype set (numeric or float).
template <class T, class F>
void run_binary(const Tensor& y, const Tensor& a, const Tensor& b, F& f) {
  T* yp = y.data_ptr<T>();
  const T* ap = a.data_ptr<T>();
  const T* bp = b.data_ptr<T>();
  // An operand of the output's shape needs no broadcast strides (size-1 dims are skipped).
  auto strides_of = [&](const Tensor& t) {
    return t.shape() == y.shape() ? t.strides()
                                  : broadcast_strides(t.shape(), t.strides(), y.shape());
  };
  std::array<Shape, 3> st = {y.strides(), strides_of(a), strides_of(b)};
  strided_for_each<3>(
      y.shape(), st, 2,
      [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
        T* yo = yp + o[0];
        const T* ao = ap + o[1];
        const T* bo = bp + o[2];
        if (s[1] == 1 && s[2] == 1) {  // the common contiguous case, vectorisable
          for (int64_t i = 0; i < n; ++i) yo[i] = f(ao[i], bo[i]);
        } else if (s[1] == 1 && s[2] == 0) {  // tensor op scalar-along-row
          const T bv = *bo;
          for (int64_t i = 0; i < n; ++i) yo[i] = f(ao[i], bv);
        } else {
          for (int64_t i = 0; i < n; ++i) yo[i] = f(ao[i * s[1]], bo[i * s[2]]);
        }
      });
}

template <class F>
Tensor map_binary_numeric(const char* op, const Tensor& a, const Tensor& b, F&& f) {
  check_same_dtype(op, a, b);
  Tensor y = empty(broadcast_shapes(op, a.shape(), b.shape()), a.dtype());
  dispatch_numeric(a.dtype(), op, [&](auto tag) { run_binary<decltype(tag)>(y, a, b, f); });
  return y;
}

template <class F>
Tensor map_binary_float(const char* op, const Tensor& a, const Tensor& b, F&& f) {
  check_same_dtype(op, a, b);
  Tensor y = empty(broadcast_shapes(op, a.shape(), b.shape()), a.dtype());
  dispatch_float(a.dtype(), op, [&](auto tag) { run_binary<decltype(tag)>(y, a, b, f); });
  return y;
}

// A scalar x's dtype cannot hold (0.5 for int64, 2 for bool) is a DTypeError naming `op`, not a
// silent rounding.
inline void check_scalar_fits(const char* op, const Tensor& x, double value) {
  constexpr double kInt64Limit = 9223372036854775808.0;  // 2^63; every double below converts
  const bool fits = x.dtype() == DType::Int64
                        ? std::floor(value) == value && value >= -kInt64Limit && value < kInt64Limit
                    : x.dtype() == DType::Bool ? value == 0 || value == 1
                                               : true;
  if (!fits)
    throw DTypeError(fmt::format("{}: scalar {} does not fit the {} input of shape {}", op, value,
                                 dtype_name(x.dtype()), shape_str(x.shape())));
}

// A 0-d tensor holding `value` in x's dtype, for tensor-scalar ops.
inline Tensor scalar_like(const char* op, const Tensor& x, double value) {
  check_scalar_fits(op, x, value);
  return scalar_tensor(value, x.dtype());
}

}  // namespace nabla::kernels
