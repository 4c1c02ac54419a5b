// The convolution's tuned kernels: per-sample im2col + GEMM (ops/kernels/conv.h says why).
#include "ops/kernels/conv.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "ops/gemm.h"

namespace nabla::kernels {
namespace {

// A sample's column matrix is the sample itself: 1x1 taps at stride 1 with no padding.
bool columns_are_input(const Window& w) {
  return w.kh == 1 && w.kw == 1 && w.sh == 1 && w.sw == 1 && w.ph == 0 && w.pw == 0 &&
         w.ph_end == 0 && w.pw_end == 0;
}

// Parts the batch is split into: one per thread when the work pays for waking them, else 1 (and
// then a large sample's GEMMs may split themselves). Samples [begin, end) of part p.
struct SampleParts {
  int64_t count = 1, B = 0;
  explicit SampleParts(const ConvGeometry& g) : B(g.win.B) {
    const int64_t per_sample = g.O * g.win.cols() * std::max<int64_t>(g.taps(), 1);
    if (B > 1 && !in_parallel_part() && B * per_sample >= kParallelGrain)
      count = std::min<int64_t>(split_parts(), B);
  }
  int64_t begin(int64_t p) const { return B * p / count; }
  int64_t end(int64_t p) const { return B * (p + 1) / count; }
};

// The sum of n values in double, in 8 independent lanes (one chain of dependent adds would take
// the add latency per element).
template <class T>
double row_sum(const T* v, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lanes[k] += static_cast<double>(v[i + k]);
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(v[i]);
  for (double lane : lanes) s += lane;
  return s;
}

template <class T>
void forward_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                  const ConvGeometry& g) {
  const Window& w = g.win;
  const int64_t G = g.groups, Og = g.out_group(), Kg = g.taps(), K = w.rows(), L = w.cols();
  const T* xp = x.data_ptr<T>();
  const T* wp = weight.data_ptr<T>();
  const T* bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* yp = y.data_ptr<T>();
  const bool direct = columns_are_input(w);
  const SampleParts parts(g);
  Tensor scratch = empty({parts.count, direct ? 0 : K * L}, x.dtype());  // a part's columns
  T* sp = scratch.data_ptr<T>();
  run_parts(parts.count, [&](int64_t p) {
    T* cols = sp + p * (direct ? 0 : K * L);
    for (int64_t b = parts.begin(p); b < parts.end(p); ++b) {
      const T* xb = xp + b * w.C * w.H * w.W;
      T* yb = yp + b * g.O * L;
      const bool taps = Kg > 0 && Og > 0;  // else the bias alone (BLAS refuses k = 0 here)
      if (bp || !taps)  // the GEMM adds onto the bias while the sample's rows are in cache
        for (int64_t o = 0; o < g.O; ++o)
          std::fill(yb + o * L, yb + (o + 1) * L, bp ? bp[o] : T(0));
      if (!taps) continue;
      if (!direct) im2col_rows(xb, cols, w, 0, K);
      const T* cb = direct ? xb : cols;
      for (int64_t grp = 0; grp < G; ++grp)
        blas::gemm<T>(false, false, Og, L, Kg, T(1), wp + grp * Og * Kg, Kg, cb + grp * Kg * L, L,
                      bp ? T(1) : T(0), yb + grp * Og * L, L);
    }
  });
}

template <class T>
void backward_impl(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                   const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                   const ConvGeometry& g) {
  const Window& w = g.win;
  const int64_t G = g.groups, Og = g.out_group(), Kg = g.taps(), K = w.rows(), L = w.cols();
  const int64_t image = w.C * w.H * w.W, weight_size = g.O * Kg;
  const bool need_x = grad_x.defined(), need_w = grad_weight.defined();
  const bool need_b = grad_bias.defined(), direct = columns_are_input(w);
  const bool taps = Kg > 0 && Og > 0;
  const T* gyp = grad_y.data_ptr<T>();
  const T* xp = need_w ? x.data_ptr<T>() : nullptr;
  const T* wp = need_x ? weight.data_ptr<T>() : nullptr;
  T* gxp = need_x ? grad_x.data_ptr<T>() : nullptr;
  const SampleParts parts(g);
  // Per part: the columns of x (weight gradient), those of the input gradient, and, with more
  // than one part, its own weight-gradient block; the bias sums in double.
  const int64_t cols_size = !direct && need_w ? K * L : 0,
                gcols_size = !direct && need_x ? K * L : 0;
  const int64_t own_w = need_w && parts.count > 1 ? weight_size : 0;
  const int64_t per_part = cols_size + gcols_size + own_w;
  Tensor scratch = empty({parts.count, per_part}, x.dtype());
  T* sp = scratch.data_ptr<T>();
  for (int64_t p = 0; own_w > 0 && p < parts.count; ++p) {  // the blocks the GEMMs add into
    T* block = sp + p * per_part + cols_size + gcols_size;
    std::fill(block, block + own_w, T(0));
  }
  if (need_w) Tensor(grad_weight).zero_();  // a handle: the same storage
  std::vector<double> bias_sums(need_b ? static_cast<size_t>(parts.count * g.O) : 0, 0.0);
  run_parts(parts.count, [&](int64_t p) {
    T* cols = sp + p * per_part;
    T* gcols = cols + cols_size;
    T* gw = own_w ? gcols + gcols_size : (need_w ? grad_weight.data_ptr<T>() : nullptr);
    double* gb = need_b ? bias_sums.data() + p * g.O : nullptr;
    for (int64_t b = parts.begin(p); b < parts.end(p); ++b) {
      const T* gyb = gyp + b * g.O * L;
      if (need_b)
        for (int64_t o = 0; o < g.O; ++o) gb[o] += row_sum(gyb + o * L, L);
      if (need_w && taps) {
        const T* xb = xp + b * image;
        if (!direct) im2col_rows(xb, cols, w, 0, K);
        const T* cb = direct ? xb : cols;
        for (int64_t grp = 0; grp < G; ++grp)  // gw_g += gy_g (Og x L) cols_g^T (L x Kg)
          blas::gemm<T>(false, true, Og, Kg, L, T(1), gyb + grp * Og * L, L, cb + grp * Kg * L, L,
                        T(1), gw + grp * Og * Kg, Kg);
      }
      if (need_x) {
        T* gxb = gxp + b * image;
        if (!taps) {
          std::fill(gxb, gxb + image, T(0));
          continue;
        }
        T* dst = direct ? gxb : gcols;  // gcols_g = w_g^T (Kg x Og) gy_g (Og x L)
        for (int64_t grp = 0; grp < G; ++grp)
          blas::gemm<T>(true, false, Kg, L, Og, T(1), wp + grp * Og * Kg, Kg, gyb + grp * Og * L, L,
                        T(0), dst + grp * Kg * L, L);
        if (!direct) {
          std::fill(gxb, gxb + image, T(0));
          col2im_planes(gcols, gxb, w, 0, w.C);
        }
      }
    }
  });
  if (own_w) {  // the parts' blocks, summed in part order
    T* gw = grad_weight.data_ptr<T>();
    for (int64_t p = 0; p < parts.count; ++p) {
      const T* part = sp + p * per_part + cols_size + gcols_size;
      for (int64_t i = 0; i < weight_size; ++i) gw[i] += part[i];
    }
  }
  if (need_b) {
    T* gb = grad_bias.data_ptr<T>();
    for (int64_t o = 0; o < g.O; ++o) {
      double s = 0;
      for (int64_t p = 0; p < parts.count; ++p) s += bias_sums[static_cast<size_t>(p * g.O + o)];
      gb[o] = static_cast<T>(s);
    }
  }
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                    const ConvGeometry& g) {
  dispatch_float(x.dtype(), "conv2d",
                 [&](auto tag) { forward_impl<decltype(tag)>(x, weight, bias, y, g); });
}

void conv2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                     const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                     const ConvGeometry& g) {
  dispatch_float(grad_y.dtype(), "conv2d", [&](auto tag) {
    backward_impl<decltype(tag)>(grad_y, x, weight, grad_x, grad_weight, grad_bias, g);
  });
}

}  // namespace nabla::kernels
