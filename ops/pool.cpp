// Max pooling, and the plane view and window sizes every pooling op shares (ops/pool_layout.h).
// The average pools are in ops/avg_pool.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/pool.h"
#include "nabla/ops/pool.h"
#include "nabla/ops/pool_layout.h"

namespace nabla {

PoolInput pool_input(const char* op, const Tensor& x, int spatial) {
  if (x.dim() != spatial + 1 && x.dim() != spatial + 2)
    throw ShapeError(fmt::format("{}: expects x {} or {}, got shape {}", op,
                                 spatial == 2 ? "(B, C, H, W)" : "(B, C, L)",
                                 spatial == 2 ? "(C, H, W)" : "(C, L)", shape_str(x.shape())));
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("{}: expects float32 or float64, got {}", op, dtype_name(x.dtype())));
  PoolInput in;
  in.spatial = spatial;
  in.lead = Shape(x.shape().begin(), x.shape().end() - spatial);
  in.W = x.size(-1);
  in.H = spatial == 2 ? x.size(-2) : 1;
  in.x3 = x.reshape({shape_numel(in.lead), in.H, in.W});
  return in;
}

Tensor PoolInput::to_caller(const Tensor& y3) const {
  Shape shape = lead;
  if (spatial == 2) shape.push_back(y3.size(1));
  shape.push_back(y3.size(2));
  return y3.reshape(shape);
}

PoolAxis pool_axis(const char* op, const Tensor& x, const char* dims, int64_t in, int64_t kernel,
                   int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode, int64_t max_pad) {
  if (kernel <= 0 || stride <= 0 || dilation <= 0 || pad < 0)
    throw ValueError(
        fmt::format("{}: kernel_size {}, stride {} and dilation {} must be positive and padding {} "
                    "non-negative ({})",
                    op, kernel, stride, dilation, pad, dims));
  if (pad > max_pad)
    throw ValueError(fmt::format(
        "{}: padding {} must be at most half the kernel size ({}), got kernel_size {} ({})", op,
        pad, max_pad, kernel, dims));
  // PyTorch's pooling_output_shape, with checked arithmetic: (in + 2 pad - dilation (kernel -
  // 1) - 1 [+ stride - 1 in ceil mode]) / stride rounded down, + 1; in ceil mode the last window
  // must start inside the input or its left padding.
  int64_t span = 0, num = 0;
  if (__builtin_mul_overflow(dilation, kernel - 1, &span) ||
      __builtin_add_overflow(in, 2 * pad, &num) || __builtin_sub_overflow(num, span, &num) ||
      __builtin_sub_overflow(num, 1, &num) ||
      (ceil_mode && __builtin_add_overflow(num, stride - 1, &num)))
    throw ShapeError(
        fmt::format("{}: input {} with kernel_size {}, padding {}, dilation {} "
                    "overflows int64 ({})",
                    op, shape_str(x.shape()), kernel, pad, dilation, dims));
  int64_t out = num / stride - (num < 0 && num % stride != 0 ? 1 : 0) + 1;  // floor, + 1
  if (ceil_mode && out > 0 && (out - 1) * stride >= in + pad) --out;
  if (out < 1)
    throw ShapeError(fmt::format(
        "{}: input {} is too small for kernel_size {} with padding {}, dilation {} and stride {}: "
        "the output {} would be {}",
        op, shape_str(x.shape()), kernel, pad, dilation, stride, dims, out));
  return {in, kernel, stride, pad, dilation, out};
}

namespace {

// Window o along an axis: its first tap inside the input and the end of its taps (`dilation`
// apart).
struct Taps {
  int64_t begin, end;
};
Taps window_taps(const PoolAxis& a, int64_t o) {
  int64_t begin = o * a.stride - a.pad;
  const int64_t end = std::min(begin + (a.kernel - 1) * a.dilation + 1, a.in);
  if (begin < 0) begin += (-begin + a.dilation - 1) / a.dilation * a.dilation;
  return {begin, end};
}

// Planes [p0, p1) of x -> y and indices; `rows` and `cols` hold each output row's and column's
// taps (computed once per call). Outputs [ow_lo, ow_hi), whose windows need no clipping, go to
// the tuned kernel (ops/kernels/pool.h); an empty range leaves every output to the loop here.
template <class T>
void max_pool_planes(const T* x, T* y, int64_t* indices, const PoolAxis& ah, const PoolAxis& aw,
                     const std::vector<Taps>& rows, const std::vector<Taps>& cols, int64_t ow_lo,
                     int64_t ow_hi, int64_t p0, int64_t p1) {
  const int64_t W = aw.in, dh = ah.dilation, dw = aw.dilation;
  for (int64_t p = p0; p < p1; ++p) {
    const T* xp = x + p * ah.in * W;
    T* yp = y + p * ah.out * aw.out;
    int64_t* ip = indices + p * ah.out * aw.out;
    for (int64_t oh = 0; oh < ah.out; ++oh) {
      const Taps th = rows[static_cast<size_t>(oh)];
      T* y_row = yp + oh * aw.out;
      int64_t* i_row = ip + oh * aw.out;
      kernels::max_pool_row_interior(xp, W, aw, th.begin, th.end, dh, ow_lo, ow_hi, y_row, i_row);
      for (int64_t ow = 0; ow < aw.out; ++ow) {
        if (ow == ow_lo) ow = ow_hi;  // the interior is done
        if (ow >= aw.out) break;
        const Taps tw = cols[static_cast<size_t>(ow)];
        // As PyTorch: start at -inf on the first tap; a larger value or any NaN takes over.
        T best = -std::numeric_limits<T>::infinity();
        int64_t arg = th.begin < th.end && tw.begin < tw.end ? th.begin * W + tw.begin : -1;
        for (int64_t h = th.begin; h < th.end; h += dh)
          for (int64_t w = tw.begin; w < tw.end; w += dw) {
            const T v = xp[h * W + w];
            if (v > best || std::isnan(v)) {
              best = v;
              arg = h * W + w;
            }
          }
        y_row[ow] = best;
        i_row[ow] = arg;
      }
    }
  }
}

std::vector<Taps> all_taps(const PoolAxis& a) {
  std::vector<Taps> taps(static_cast<size_t>(a.out));
  for (int64_t o = 0; o < a.out; ++o) taps[static_cast<size_t>(o)] = window_taps(a, o);
  return taps;
}

}  // namespace

// ----------------------------------------------------------------------------
// max_pool1d / max_pool2d (on planes (P, H, W); 1-D has H = 1)
//   forward:   y[p, o] = x[p, idx[p, o]], idx = the argmax over the window (first on ties, a
//              NaN wins); -inf and idx -1 for a window of padding only
//   backward:  grad_x[p, idx[p, o]] += grad[p, o]     (scatter_add: differentiable again)
//              saves the indices
struct MaxPoolBackward final : Node {
  SavedTensor indices{this, "indices"};
  const char* node_name;
  explicit MaxPoolBackward(const char* n) : node_name(n) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Shape& x_shape = input_shapes[0];  // (P, H, W)
    const int64_t P = x_shape[0], HW = x_shape[1] * x_shape[2];
    const Tensor idx = indices.get();  // (P, OH, OW)
    const int64_t per_plane = idx.size(1) * idx.size(2);
    if (GradMode::enabled()) {  // create_graph: column 0 collects the (-1) padding-only windows
      Tensor shifted = empty({P, per_plane}, kInt64);
      const int64_t* ip = idx.data_ptr<int64_t>();
      int64_t* sp = shifted.data_ptr<int64_t>();
      for (int64_t i = 0; i < P * per_plane; ++i) sp[i] = ip[i] + 1;
      Tensor gx =
          scatter_add(zeros({P, HW + 1}, grad.dtype()), 1, shifted, grad.reshape({P, per_plane}));
      return {gx.narrow(1, 1, HW).reshape(x_shape)};
    }
    Tensor gx = empty(x_shape, grad.dtype());
    const Tensor gy = grad.contiguous();
    dispatch_float(grad.dtype(), "max_pool", [&](auto tag) {
      using T = decltype(tag);
      const T* gp = gy.data_ptr<T>();
      const int64_t* ip = idx.data_ptr<int64_t>();
      T* xp = gx.data_ptr<T>();
      // A plane's windows write only to it: zeroed and filled while it is in cache.
      parallel_for(P, HW + per_plane, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          std::fill(xp + p * HW, xp + (p + 1) * HW, T(0));
          for (int64_t o = p * per_plane; o < (p + 1) * per_plane; ++o)
            if (ip[o] >= 0) xp[p * HW + ip[o]] += gp[o];
        }
      });
    });
    return {gx};
  }
  const char* name() const override { return node_name; }
};

namespace {

MaxPoolResult max_pool(const char* op, const char* node_name, int spatial, const Tensor& x,
                       Size2 kernel, Size2 stride, Size2 padding, Size2 dilation, bool ceil_mode) {
  const PoolInput in = pool_input(op, x, spatial);
  if (!stride.given) stride = kernel;
  const char* h_name = "height";
  const char* w_name = spatial == 2 ? "width" : "length";
  const PoolAxis ah = spatial == 2 ? pool_axis(op, x, h_name, in.H, kernel[0], stride[0],
                                               padding[0], dilation[0], ceil_mode, kernel[0] / 2)
                                   : PoolAxis{1, 1, 1, 0, 1, 1};
  const PoolAxis aw = pool_axis(op, x, w_name, in.W, kernel[1], stride[1], padding[1], dilation[1],
                                ceil_mode, kernel[1] / 2);
  const int64_t P = in.x3.size(0);
  Tensor y = empty({P, ah.out, aw.out}, x.dtype());
  Tensor indices = empty({P, ah.out, aw.out}, kInt64);
  const Tensor xc = in.x3.detach().contiguous();
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    int64_t* ip = indices.data_ptr<int64_t>();
    const std::vector<Taps> rows = all_taps(ah), cols = all_taps(aw);
    // Plain variables, not a structured binding: clang 14 (the TSan build) cannot capture those.
    // The reference kernels leave the interior empty: every output takes the loop below.
    const std::pair<int64_t, int64_t> interior =
        kernels::tuned_enabled() ? kernels::max_pool_interior(aw) : std::pair<int64_t, int64_t>{};
    const int64_t ow_lo = interior.first, ow_hi = interior.second;
    parallel_for(P, in.H * in.W + ah.out * aw.out, [&](int64_t p0, int64_t p1) {
      max_pool_planes(xp, yp, ip, ah, aw, rows, cols, ow_lo, ow_hi, p0, p1);
    });
  });
  if (auto node = make_node<MaxPoolBackward>({&in.x3}, node_name)) {
    node->indices.save(indices);
    set_history(y, node);
  }
  return {in.to_caller(y), in.to_caller(indices)};
}

}  // namespace

MaxPoolResult max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, Size2 stride,
                                      Size2 padding, Size2 dilation, bool ceil_mode) {
  inspect::OpScope op_scope("max_pool2d_with_indices", {&x});
  return max_pool("max_pool2d_with_indices", "MaxPool2dBackward", 2, x, kernel_size, stride,
                  padding, dilation, ceil_mode);
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  inspect::OpScope op_scope("max_pool2d", {&x});
  return max_pool("max_pool2d", "MaxPool2dBackward", 2, x, kernel_size, stride, padding, dilation,
                  ceil_mode)
      .output;
}

MaxPoolResult max_pool1d_with_indices(const Tensor& x, int64_t kernel_size,
                                      std::optional<int64_t> stride, int64_t padding,
                                      int64_t dilation, bool ceil_mode) {
  inspect::OpScope op_scope("max_pool1d_with_indices", {&x});
  return max_pool("max_pool1d_with_indices", "MaxPool1dBackward", 1, x, {1, kernel_size},
                  {1, stride.value_or(kernel_size)}, {0, padding}, {1, dilation}, ceil_mode);
}

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride,
                  int64_t padding, int64_t dilation, bool ceil_mode) {
  inspect::OpScope op_scope("max_pool1d", {&x});
  return max_pool("max_pool1d", "MaxPool1dBackward", 1, x, {1, kernel_size},
                  {1, stride.value_or(kernel_size)}, {0, padding}, {1, dilation}, ceil_mode)
      .output;
}

}  // namespace nabla
