// Average pools: avg_pool1d/2d and adaptive_avg_pool1d/2d. Each is a linear map given by its
// windows, which are products of per-axis ones: for every output index along an axis, an input
// range [begin, end) and a divisor factor. The window means and their adjoint (each output's
// gradient spread evenly over its window) are recorded ops and each other's backward, so the
// pools are differentiable to any order.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/pool.h"
#include "nabla/ops/pool_layout.h"

namespace nabla {
namespace {

__extension__ typedef __int128 Wide;  // adaptive windows multiply two sizes

// One axis's windows: for output index o, the input range [begin, end) it averages and its
// divisor factor. Computed when needed (a few integer operations), so nothing is stored per
// output index.
struct AxisWindows {
  struct Range {
    int64_t begin, end, divisor;
  };
  PoolAxis axis;                  // sliding (avg_pool); axis.out windows
  bool adaptive = false;          // else sliding
  bool count_include_pad = true;  // sliding only
  int64_t size() const { return axis.out; }

  Range at(int64_t o) const {
    const PoolAxis& a = axis;
    if (adaptive) {  // [floor(o n / m), ceil((o + 1) n / m)), as PyTorch's start/end_index
      const auto begin = static_cast<int64_t>(Wide(o) * a.in / a.out);
      const auto end = static_cast<int64_t>((Wide(o + 1) * a.in + a.out - 1) / a.out);
      return {begin, end, end - begin};
    }
    // As PyTorch's CPU kernel: the window clipped to the padded input sets the divisor with
    // count_include_pad, the window clipped to the input the range (and the divisor without);
    // a window of padding only has output 0.
    int64_t begin = o * a.stride - a.pad;
    int64_t end = std::min(begin + a.kernel, a.in + a.pad);
    const int64_t padded = end - begin;
    begin = std::max<int64_t>(begin, 0);
    end = std::min(end, a.in);
    if (end <= begin) return {0, 0, 1};
    return {begin, end, count_include_pad ? padded : end - begin};
  }
};

AxisWindows sliding_windows(const PoolAxis& a, bool count_include_pad) {
  return {a, false, count_include_pad};
}

AxisWindows adaptive_windows(int64_t n, int64_t m) {
  return {PoolAxis{n, 1, 1, 0, 1, m}, true, true};
}

// Planes (P, H, W) -> (P, OH, OW); window (oh, ow) divides by divisor_h[oh] * divisor_w[ow].
struct MeanGeometry {
  int64_t P = 0, H = 0, W = 0;
  AxisWindows h, w;
  const char* node_name = "";  // the pool's backward node, e.g. AvgPool2dBackward
};
using Geometry = std::shared_ptr<const MeanGeometry>;

// In double: two kernel sizes (huge with huge paddings) would overflow as a product of ints.
double divisor(const AxisWindows::Range& h, const AxisWindows::Range& w) {
  return static_cast<double>(h.divisor) * static_cast<double>(w.divisor);
}

template <class T>
void mean_planes(const T* x, T* y, const MeanGeometry& g, int64_t p0, int64_t p1) {
  const int64_t OH = g.h.size(), OW = g.w.size();
  for (int64_t p = p0; p < p1; ++p) {
    const T* xp = x + p * g.H * g.W;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AxisWindows::Range rh = g.h.at(oh), rw = g.w.at(ow);
        double s = 0;
        for (int64_t h = rh.begin; h < rh.end; ++h)
          for (int64_t w = rw.begin; w < rw.end; ++w) s += static_cast<double>(xp[h * g.W + w]);
        y[(p * OH + oh) * OW + ow] = static_cast<T>(s / divisor(rh, rw));
      }
  }
}

// The adjoint: gx = the sum of each output's gradient / divisor over its window, a plane at a
// time (zeroed and filled while it is in cache).
template <class T>
void mean_adjoint_planes(const T* gy, T* gx, const MeanGeometry& g, int64_t p0, int64_t p1) {
  const int64_t OH = g.h.size(), OW = g.w.size();
  for (int64_t p = p0; p < p1; ++p) {
    T* xp = gx + p * g.H * g.W;
    std::fill(xp, xp + g.H * g.W, T(0));
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AxisWindows::Range rh = g.h.at(oh), rw = g.w.at(ow);
        const auto v =
            static_cast<T>(static_cast<double>(gy[(p * OH + oh) * OW + ow]) / divisor(rh, rw));
        for (int64_t h = rh.begin; h < rh.end; ++h)
          for (int64_t w = rw.begin; w < rw.end; ++w) xp[h * g.W + w] += v;
      }
  }
}

Tensor window_mean(const Tensor& x3, const Geometry& g);
Tensor window_mean_adjoint(const Tensor& grad3, const Geometry& g);

}  // namespace

// ----------------------------------------------------------------------------
// avg_pool1d / avg_pool2d / adaptive_avg_pool1d / adaptive_avg_pool2d (planes (P, H, W))
//   forward:   y[p, oh, ow] = sum of x[p, h, w] over the window (oh, ow) / its divisor
//   backward:  grad_x[p, h, w] = sum over the windows holding (h, w) of grad[p, oh, ow] / divisor
//              (window_mean_adjoint, whose own backward is window_mean)      saves nothing
struct WindowMeanBackward final : Node {
  Geometry g;
  explicit WindowMeanBackward(Geometry geometry) : g(std::move(geometry)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {window_mean_adjoint(grad, g)};
  }
  const char* name() const override { return g->node_name; }
};

struct WindowMeanAdjointBackward final : Node {
  Geometry g;
  explicit WindowMeanAdjointBackward(Geometry geometry) : g(std::move(geometry)) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {window_mean(grad, g)}; }
  const char* name() const override { return "AvgPoolBackwardBackward"; }
};

namespace {

Tensor window_mean(const Tensor& x3, const Geometry& g) {
  Tensor y = empty({g->P, g->h.size(), g->w.size()}, x3.dtype());
  const Tensor xc = x3.detach().contiguous();
  dispatch_float(x3.dtype(), "avg_pool", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(g->P, g->H * g->W + y.size(1) * y.size(2),
                 [&](int64_t p0, int64_t p1) { mean_planes(xp, yp, *g, p0, p1); });
  });
  if (auto node = make_node<WindowMeanBackward>({&x3}, g)) set_history(y, node);
  return y;
}

Tensor window_mean_adjoint(const Tensor& grad3, const Geometry& g) {
  Tensor gx = empty({g->P, g->H, g->W}, grad3.dtype());
  const Tensor gc = grad3.detach().contiguous();
  dispatch_float(grad3.dtype(), "avg_pool", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = gc.data_ptr<T>();
    T* xp = gx.data_ptr<T>();
    parallel_for(g->P, g->H * g->W + gc.size(1) * gc.size(2),
                 [&](int64_t p0, int64_t p1) { mean_adjoint_planes(gp, xp, *g, p0, p1); });
  });
  if (auto node = make_node<WindowMeanAdjointBackward>({&grad3}, g)) set_history(gx, node);
  return gx;
}

Tensor avg_pool(const char* op, const char* node_name, int spatial, const Tensor& x, Size2 kernel,
                Size2 stride, Size2 padding, bool ceil_mode, bool count_include_pad) {
  const PoolInput in = pool_input(op, x, spatial);
  if (!stride.given) stride = kernel;
  const PoolAxis ah = spatial == 2 ? pool_axis(op, x, "height", in.H, kernel[0], stride[0],
                                               padding[0], 1, ceil_mode, kernel[0] / 2)
                                   : PoolAxis{1, 1, 1, 0, 1, 1};
  const PoolAxis aw = pool_axis(op, x, spatial == 2 ? "width" : "length", in.W, kernel[1],
                                stride[1], padding[1], 1, ceil_mode, kernel[1] / 2);
  auto g = std::make_shared<MeanGeometry>();
  *g = {in.x3.size(0),
        in.H,
        in.W,
        sliding_windows(ah, count_include_pad),
        sliding_windows(aw, count_include_pad),
        node_name};
  return in.to_caller(window_mean(in.x3, g));
}

Tensor adaptive_avg_pool(const char* op, const char* node_name, int spatial, const Tensor& x,
                         Size2 output_size) {
  const PoolInput in = pool_input(op, x, spatial);
  if (in.H <= 0 || in.W <= 0 || output_size[0] < 0 || output_size[1] < 0)
    throw ShapeError(fmt::format(
        "{}: needs an input with non-empty spatial dims and output_size >= 0, got input {} and "
        "output_size {}",
        op, shape_str(x.shape()),
        spatial == 2 ? fmt::format("({}, {})", output_size[0], output_size[1])
                     : std::to_string(output_size[1])));
  auto g = std::make_shared<MeanGeometry>();
  *g = {in.x3.size(0),
        in.H,
        in.W,
        adaptive_windows(in.H, output_size[0]),
        adaptive_windows(in.W, output_size[1]),
        node_name};
  return in.to_caller(window_mean(in.x3, g));
}

}  // namespace

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad) {
  inspect::OpScope op_scope("avg_pool2d", {&x});
  return avg_pool("avg_pool2d", "AvgPool2dBackward", 2, x, kernel_size, stride, padding, ceil_mode,
                  count_include_pad);
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, bool ceil_mode, bool count_include_pad) {
  inspect::OpScope op_scope("avg_pool1d", {&x});
  return avg_pool("avg_pool1d", "AvgPool1dBackward", 1, x, {1, kernel_size},
                  {1, stride.value_or(kernel_size)}, {0, padding}, ceil_mode, count_include_pad);
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size) {
  inspect::OpScope op_scope("adaptive_avg_pool2d", {&x});
  return adaptive_avg_pool("adaptive_avg_pool2d", "AdaptiveAvgPool2dBackward", 2, x, output_size);
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  inspect::OpScope op_scope("adaptive_avg_pool1d", {&x});
  return adaptive_avg_pool("adaptive_avg_pool1d", "AdaptiveAvgPool1dBackward", 1, x,
                           {1, output_size});
}

}  // namespace nabla
