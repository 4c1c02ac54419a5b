// The sliding-window geometry (checked once, for every op that slides a window) and unfold/fold
// as recorded ops over it. unfold (im2col) and fold (col2im) are each other's adjoint and
// backward, so anything built from them (conv2d_composite, the convolution's backward under
// create_graph) is differentiable to any order.
#include "nabla/ops/im2col.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/parallel.h"

namespace nabla {

std::string int2_str(Int2 v, int spatial_dims) {
  return spatial_dims == 1 ? fmt::format("({},)", v[1]) : fmt::format("({}, {})", v[0], v[1]);
}

namespace {

// out = a * b + c, false on int64 overflow.
bool fits(int64_t a, int64_t b, int64_t c, int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out) && !__builtin_add_overflow(out, c, &out);
}

}  // namespace

Window make_window(const char* op, int64_t B, int64_t C, Int2 image, const WindowSpec& s,
                   int spatial_dims) {
  auto str = [&](Int2 v) { return int2_str(v, spatial_dims); };
  auto padding_str = [&] {
    return s.pad_begin == s.pad_end
               ? str(s.pad_begin)
               : fmt::format("{} before and {} after", str(s.pad_begin), str(s.pad_end));
  };
  for (int d = 0; d < 2; ++d)
    if (s.kernel[d] <= 0 || s.stride[d] <= 0 || s.dilation[d] <= 0 || s.pad_begin[d] < 0 ||
        s.pad_end[d] < 0)
      throw ValueError(
          fmt::format("{}: kernel {}, stride {} and dilation {} must be positive and padding {} "
                      "non-negative",
                      op, str(s.kernel), str(s.stride), str(s.dilation), padding_str()));
  // Checked: a padding, kernel or dilation near INT64_MAX must be an error, not overflow.
  Int2 padded{}, span{}, out{};
  for (int d = 0; d < 2; ++d) {
    if (!fits(s.pad_begin[d], 1, image[d], padded[d]) ||
        !fits(s.pad_end[d], 1, padded[d], padded[d]))
      throw ShapeError(
          fmt::format("{}: padding {} of image {} overflows int64", op, padding_str(), str(image)));
    if (!fits(s.dilation[d], s.kernel[d] - 1, 1, span[d]))
      throw ShapeError(fmt::format("{}: kernel {} with dilation {} spans past int64", op,
                                   str(s.kernel), str(s.dilation)));
  }
  if (padded[0] < span[0] || padded[1] < span[1]) {
    const std::string kernel = s.dilation == Int2{1, 1}
                                   ? str(s.kernel)
                                   : fmt::format("{} with dilation {} (spanning {})", str(s.kernel),
                                                 str(s.dilation), str(span));
    throw ShapeError(
        fmt::format("{}: kernel {} is larger than the padded image {} (image {}, "
                    "padding {})",
                    op, kernel, str(padded), str(image), padding_str()));
  }
  for (int d = 0; d < 2; ++d) out[d] = (padded[d] - span[d]) / s.stride[d] + 1;
  int64_t rows = 0, cols = 0;
  if (!fits(C, s.kernel[0], 0, rows) || !fits(rows, s.kernel[1], 0, rows) ||
      !fits(out[0], out[1], 0, cols))
    throw ShapeError(
        fmt::format("{}: kernel {} over image {} (padding {}) gives a column matrix "
                    "past int64",
                    op, str(s.kernel), str(image), padding_str()));
  return {B,
          C,
          image[0],
          image[1],
          s.kernel[0],
          s.kernel[1],
          s.stride[0],
          s.stride[1],
          s.dilation[0],
          s.dilation[1],
          s.pad_begin[0],
          s.pad_begin[1],
          s.pad_end[0],
          s.pad_end[1],
          out[0],
          out[1]};
}

// ----------------------------------------------------------------------------
// unfold (im2col) on a window
//   forward:   cols[b, (c*kh + i)*kw + j, oh*OW + ow] = x[b, c, oh*sh - ph + i*dh, ow*sw - pw +
//   j*dw]
//              (0 in the padding); x (B, C, H, W) -> (B, C*kh*kw, OH*OW)
//   backward:  grad_x = fold_window(grad)      saves nothing
struct UnfoldBackward final : Node {
  Window g;
  explicit UnfoldBackward(const Window& w) : g(w) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {fold_window(grad, g)}; }
  const char* name() const override { return "UnfoldBackward"; }
};

Tensor unfold_window(const Tensor& x, const Window& g) {
  Tensor cols = empty({g.B, g.rows(), g.cols()}, x.dtype());
  const Tensor xc = x.detach().contiguous();
  dispatch_float(x.dtype(), "unfold", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* cp = cols.data_ptr<T>();
    parallel_for(g.B * g.rows(), g.cols(),
                 [&](int64_t r0, int64_t r1) { im2col_rows(xp, cp, g, r0, r1); });
  });
  if (auto node = make_node<UnfoldBackward>({&x}, g)) set_history(cols, node);
  return cols;
}

// ----------------------------------------------------------------------------
// fold (col2im) on a window, the adjoint of unfold
//   forward:   x[b, c, h, w] = sum of the cols entries unfold would read from (b, c, h, w)
//              cols (B, C*kh*kw, L) -> x (B, C, H, W), L = OH*OW
//   backward:  grad_cols = unfold_window(grad)      saves nothing
struct FoldBackward final : Node {
  Window g;
  explicit FoldBackward(const Window& w) : g(w) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {unfold_window(grad, g)}; }
  const char* name() const override { return "FoldBackward"; }
};

Tensor fold_window(const Tensor& cols, const Window& g) {
  Tensor x = zeros({g.B, g.C, g.H, g.W}, cols.dtype());
  const Tensor cc = cols.detach().contiguous();
  dispatch_float(cols.dtype(), "fold", [&](auto tag) {
    using T = decltype(tag);
    const T* cp = cc.data_ptr<T>();
    T* xp = x.data_ptr<T>();
    // One task per (b, c) plane: only that plane's kh*kw rows write to it, so no races.
    parallel_for(g.B * g.C, g.kh * g.kw * g.cols(),
                 [&](int64_t p0, int64_t p1) { col2im_planes(cp, xp, g, p0, p1); });
  });
  if (auto node = make_node<FoldBackward>({&cols}, g)) set_history(x, node);
  return x;
}

}  // namespace nabla
