#include "nabla/ops/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "nabla/core/parallel.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/vec_math.h"

namespace nabla::kernels {
namespace {

// Calls f(offset of the row's first element) for each of the l.rows() rows, split across threads.
template <class F>
void for_each_row(const RowLayout& l, int64_t cost, F&& f) {
  parallel_for(l.rows(), l.n * cost, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(l.row_start(r));
  });
}

// One row of softmax / log_softmax. NOTE: the row max is subtracted first, so exp never
// overflows; a row of only -inf gives NaN, as in PyTorch. The `omp simd` reductions let the
// compiler reorder the sums and the max across vector lanes (plain loops must keep their order).
template <class T, bool Log, bool Contig>
void softmax_row(const T* __restrict x, T* __restrict y, int64_t n, int64_t stride) {
  const int64_t st = Contig ? 1 : stride;
  T m = kNegInf<T>;
#pragma omp simd reduction(max : m)
  for (int64_t k = 0; k < n; ++k) m = x[k * st] > m ? x[k * st] : m;
  double s = 0;
  if constexpr (Log) {
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < n; ++k) s += static_cast<double>(vec_math::exp_t<T>(x[k * st] - m));
    const T lse = static_cast<T>(std::log(s));
    for (int64_t k = 0; k < n; ++k) y[k * st] = x[k * st] - m - lse;
  } else {
    // Two loops (a map, then a sum) vectorise where the fused one does not.
    for (int64_t k = 0; k < n; ++k) y[k * st] = vec_math::exp_t<T>(x[k * st] - m);
    T inv;
    if constexpr (std::is_same_v<T, float>) {
      // NOTE: float lanes, not double: the terms are in (0, 1] and one of them is 1, so each
      // lane's partial sum loses at most n/16 ulp; double sums ran at half the vector width.
      float sf = 0;
#pragma omp simd reduction(+ : sf)
      for (int64_t k = 0; k < n; ++k) sf += y[k * st];
      inv = 1.0f / sf;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t k = 0; k < n; ++k) s += static_cast<double>(y[k * st]);
      inv = static_cast<T>(1.0 / s);
    }
    for (int64_t k = 0; k < n; ++k) y[k * st] *= inv;
  }
}

// One row of the backward: softmax:     grad_x = y * (g - sum(g * y))
//                          log_softmax: grad_x = g - exp(y) * sum(g)
template <class T, bool Log, bool Contig>
void softmax_backward_row(const T* y, const T* g, T* gx, int64_t n, int64_t stride) {
  const int64_t st = Contig ? 1 : stride;
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < n; ++k)
    acc += static_cast<double>(Log ? g[k * st] : g[k * st] * y[k * st]);
  const T a = static_cast<T>(acc);
  for (int64_t k = 0; k < n; ++k)
    gx[k * st] = Log ? g[k * st] - vec_math::exp_t<T>(y[k * st]) * a : y[k * st] * (g[k * st] - a);
}

template <bool Log>
void softmax_forward_impl(const Tensor& x, Tensor& y, const RowLayout& l) {
  dispatch_float(x.dtype(), Log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for_each_row(l, 8, [&](int64_t o) {
      if (l.inner == 1) {
        softmax_row<T, Log, true>(xp + o, yp + o, l.n, 1);
      } else {
        softmax_row<T, Log, false>(xp + o, yp + o, l.n, l.inner);
      }
    });
  });
}

template <bool Log>
void softmax_backward_impl(const Tensor& y, const Tensor& g, Tensor& gx, const RowLayout& l) {
  dispatch_float(y.dtype(), Log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* yp = y.data_ptr<T>();
    const T* gp = g.data_ptr<T>();
    T* gxp = gx.data_ptr<T>();
    for_each_row(l, 4, [&](int64_t o) {
      if (l.inner == 1) {
        softmax_backward_row<T, Log, true>(yp + o, gp + o, gxp + o, l.n, 1);
      } else {
        softmax_backward_row<T, Log, false>(yp + o, gp + o, gxp + o, l.n, l.inner);
      }
    });
  });
}

}  // namespace

void softmax_forward(const Tensor& x, Tensor& y, const RowLayout& l, bool log) {
  if (log) {
    softmax_forward_impl<true>(x, y, l);
  } else {
    softmax_forward_impl<false>(x, y, l);
  }
}

void softmax_backward(const Tensor& y, const Tensor& grad, Tensor& grad_x, const RowLayout& l,
                      bool log) {
  if (log) {
    softmax_backward_impl<true>(y, grad, grad_x, l);
  } else {
    softmax_backward_impl<false>(y, grad, grad_x, l);
  }
}

void masked_softmax_forward(const Tensor& z, const Tensor& keep, Tensor& y, int64_t n) {
  const int64_t rows = n == 0 ? 0 : z.numel() / n;
  dispatch_float(z.dtype(), "masked_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    const bool* kp = keep.defined() ? keep.data_ptr<bool>() : nullptr;
    T* yp = y.data_ptr<T>();
    parallel_for(rows, n * 8, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* zr = zp + r * n;
        const bool* kr = kp ? kp + r * n : nullptr;
        T* yr = yp + r * n;
        T m = kNegInf<T>;
        bool any = false;
        for (int64_t k = 0; k < n; ++k)
          if (is_live(zr, kr, k)) {
            any = true;
            m = std::max(m, zr[k]);
          }
        double s = 0;
        for (int64_t k = 0; k < n; ++k) {
          yr[k] = any && is_live(zr, kr, k) ? std::exp(zr[k] - m) : T(0);
          s += static_cast<double>(yr[k]);
        }
        const T inv = any ? static_cast<T>(1.0 / s) : T(0);
        for (int64_t k = 0; k < n; ++k) yr[k] *= inv;
      }
    });
  });
}

}  // namespace nabla::kernels
