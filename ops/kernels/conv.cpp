// The convolution's tuned kernels: per-sample im2col + GEMM (ops/kernels/conv.h says why).
#include "nabla/ops/kernels/conv.h"

#include <algorithm>
#include <vector>

#include "nabla/core/parallel.h"
#include "nabla/ops/gemm.h"

namespace nabla::kernels {
namespace {

// A sample's column matrix is the sample itself: 1x1 taps at stride 1 with no padding.
bool columns_are_input(const Window& w) {
  return w.kh == 1 && w.kw == 1 && w.sh == 1 && w.sw == 1 && w.ph == 0 && w.pw == 0 &&
         w.ph_end == 0 && w.pw_end == 0;
}

// The work is (sample, group) items, item i = b * G + g: one GEMM each, on that group's rows of
// the sample's columns. Split into one run of items per thread when the work pays for waking them,
// else one part (whose GEMMs may then split themselves). Items [begin, end) of part p.
struct WorkParts {
  int64_t count = 1, items = 0;
  explicit WorkParts(const ConvGeometry& g) : items(g.win.B * g.groups) {
    const int64_t per_item = g.out_group() * g.win.cols() * std::max<int64_t>(g.taps(), 1);
    if (items > 1 && !in_parallel_part() && items * per_item >= parallel_grain())
      count = std::min<int64_t>(split_parts(), items);
  }
  int64_t begin(int64_t p) const { return items * p / count; }
  int64_t end(int64_t p) const { return items * (p + 1) / count; }
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

// Offsets of item i's data: its group's input planes, weight rows, output rows.
struct Item {
  int64_t x, w, y;
  Item(const ConvGeometry& g, int64_t i) {
    const Window& s = g.win;
    const int64_t b = i / g.groups, grp = i % g.groups;
    x = (b * s.C + grp * g.in_group()) * s.H * s.W;
    w = grp * g.out_group() * g.taps();
    y = (b * g.O + grp * g.out_group()) * s.cols();
  }
};

template <class T>
void forward_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                  const ConvGeometry& g) {
  const Window& w = g.win;
  const int64_t Og = g.out_group(), Kg = g.taps(), L = w.cols();
  const T* xp = x.data_ptr<T>();
  const T* wp = weight.data_ptr<T>();
  const T* bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* yp = y.data_ptr<T>();
  const bool direct = columns_are_input(w), taps = Kg > 0 && Og > 0;
  const WorkParts parts(g);
  const int64_t cols_size = direct ? 0 : Kg * L;
  Tensor scratch = empty({parts.count, cols_size}, x.dtype());  // a part's columns
  T* sp = scratch.data_ptr<T>();
  run_parts(parts.count, [&](int64_t p) {
    T* cols = sp + p * cols_size;
    for (int64_t i = parts.begin(p); i < parts.end(p); ++i) {
      const Item it(g, i);
      T* yi = yp + it.y;
      const int64_t o0 = i % g.groups * Og;
      if (bp || !taps)  // the GEMM adds onto the bias while these rows are in cache
        for (int64_t o = 0; o < Og; ++o)
          std::fill(yi + o * L, yi + (o + 1) * L, bp ? bp[o0 + o] : T(0));
      if (!taps) continue;  // no taps: the bias alone (BLAS refuses k = 0 here)
      if (!direct) im2col_rows(xp + it.x, cols, w, 0, Kg);
      blas::gemm<T>(false, false, Og, L, Kg, T(1), wp + it.w, Kg, direct ? xp + it.x : cols, L,
                    bp ? T(1) : T(0), yi, L);
    }
  });
}

template <class T>
void backward_impl(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                   const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                   const ConvGeometry& g) {
  const Window& w = g.win;
  const int64_t Og = g.out_group(), Kg = g.taps(), L = w.cols(), planes = g.in_group() * w.H * w.W;
  const int64_t weight_size = g.O * Kg;
  const bool need_x = grad_x.defined(), need_w = grad_weight.defined();
  const bool need_b = grad_bias.defined(), direct = columns_are_input(w);
  const bool taps = Kg > 0 && Og > 0;
  const T* gyp = grad_y.data_ptr<T>();
  const T* xp = need_w ? x.data_ptr<T>() : nullptr;
  const T* wp = need_x ? weight.data_ptr<T>() : nullptr;
  T* gxp = need_x ? grad_x.data_ptr<T>() : nullptr;
  const WorkParts parts(g);
  // Per part: the columns of x (weight gradient), those of the input gradient, and, with more
  // than one part, its own weight-gradient block; the bias sums in double.
  const int64_t cols_size = !direct && need_w ? Kg * L : 0;
  const int64_t gcols_size = !direct && need_x ? Kg * L : 0;
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
    for (int64_t i = parts.begin(p); i < parts.end(p); ++i) {
      const Item it(g, i);
      const T* gyi = gyp + it.y;
      if (need_b)
        for (int64_t o = 0; o < Og; ++o) gb[i % g.groups * Og + o] += row_sum(gyi + o * L, L);
      if (need_w && taps) {  // gw_g += gy_g (Og x L) cols_g^T (L x Kg)
        if (!direct) im2col_rows(xp + it.x, cols, w, 0, Kg);
        blas::gemm<T>(false, true, Og, Kg, L, T(1), gyi, L, direct ? xp + it.x : cols, L, T(1),
                      gw + it.w, Kg);
      }
      if (need_x) {  // gcols_g = w_g^T (Kg x Og) gy_g (Og x L), then back to the pixels
        T* gxi = gxp + it.x;
        if (!taps) {
          std::fill(gxi, gxi + planes, T(0));
          continue;
        }
        blas::gemm<T>(true, false, Kg, L, Og, T(1), wp + it.w, Kg, gyi, L, T(0),
                      direct ? gxi : gcols, L);
        if (!direct) {
          std::fill(gxi, gxi + planes, T(0));
          col2im_planes(gcols, gxi, w, 0, g.in_group());
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
