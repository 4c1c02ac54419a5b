// Image patches and convolution. unfold (im2col) and fold (col2im) are fused kernels and each
// other's backward, so conv2d = matmul(weight, unfold(x)) is differentiable to any order.
// patchify/unpatchify are reshapes and permutes: their backward comes from the views.
#include "ops/patches.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/autograd.h"
#include "core/error.h"
#include "core/inspect/instrument.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"
#include "ops/linalg.h"

namespace nabla {
namespace {

using Int2 = std::array<int64_t, 2>;

std::string int2_str(Int2 v) { return fmt::format("({}, {})", v[0], v[1]); }

// The geometry shared by unfold and fold: image (B, C, H, W), kernel (kh, kw), stride, padding,
// output grid (OH, OW).
struct Window {
  int64_t B, C, H, W, kh, kw, sh, sw, ph, pw, OH, OW;
  int64_t rows() const { return C * kh * kw; }  // rows of the column matrix
  int64_t cols() const { return OH * OW; }      // its columns (L)
};

Window window(const char* op, int64_t B, int64_t C, Int2 image, Int2 kernel, Int2 stride,
              Int2 padding) {
  if (kernel[0] <= 0 || kernel[1] <= 0 || stride[0] <= 0 || stride[1] <= 0 || padding[0] < 0 ||
      padding[1] < 0)
    throw ValueError(
        fmt::format("{}: kernel {} and stride {} must be positive and padding {} non-negative", op,
                    int2_str(kernel), int2_str(stride), int2_str(padding)));
  // Checked: a padding or kernel near INT64_MAX must be an error, not signed overflow.
  int64_t hp = 0, wp = 0, rows = 0, cols = 0;
  auto fits = [](int64_t a, int64_t b, int64_t c, int64_t& out) {  // out = a * b + c
    return !__builtin_mul_overflow(a, b, &out) && !__builtin_add_overflow(out, c, &out);
  };
  if (!fits(padding[0], 2, image[0], hp) || !fits(padding[1], 2, image[1], wp))
    throw ShapeError(fmt::format("{}: padding {} of image {} overflows int64", op,
                                 int2_str(padding), int2_str(image)));
  if (hp < kernel[0] || wp < kernel[1])
    throw ShapeError(
        fmt::format("{}: kernel {} is larger than the padded image {} (image {}, "
                    "padding {})",
                    op, int2_str(kernel), int2_str({hp, wp}), int2_str(image), int2_str(padding)));
  const int64_t oh = (hp - kernel[0]) / stride[0] + 1, ow = (wp - kernel[1]) / stride[1] + 1;
  if (!fits(C, kernel[0], 0, rows) || !fits(rows, kernel[1], 0, rows) || !fits(oh, ow, 0, cols))
    throw ShapeError(
        fmt::format("{}: kernel {} over image {} (padding {}) gives a column matrix "
                    "past int64",
                    op, int2_str(kernel), int2_str(image), int2_str(padding)));
  return {B,         C,         image[0],   image[1],   kernel[0], kernel[1],
          stride[0], stride[1], padding[0], padding[1], oh,        ow};
}

// cols (B, C*kh*kw, OH*OW) from a contiguous image x (B, C, H, W).
template <class T>
void im2col(const T* x, T* cols, const Window& g) {
  const int64_t K = g.rows(), L = g.cols();
  parallel_for(g.B * K, L, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t j = r % g.kw, i = r / g.kw % g.kh, plane = r / (g.kh * g.kw);  // plane b*C+c
      const T* image = x + plane * g.H * g.W;
      T* out = cols + r * L;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h = oh * g.sh - g.ph + i;
        T* out_row = out + oh * g.OW;
        if (h < 0 || h >= g.H) {
          std::fill(out_row, out_row + g.OW, T(0));
          continue;
        }
        const T* in_row = image + h * g.W;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w = ow * g.sw - g.pw + j;
          out_row[ow] = w >= 0 && w < g.W ? in_row[w] : T(0);
        }
      }
    }
  });
}

// x (B, C, H, W), zero-initialised, += every cols entry at the pixel it was read from.
template <class T>
void col2im(const T* cols, T* x, const Window& g) {
  const int64_t L = g.cols();
  // One task per (b, c) plane: only that plane's kh*kw rows write to it, so no races.
  parallel_for(g.B * g.C, g.kh * g.kw * L, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      T* image = x + plane * g.H * g.W;
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const T* in = cols + ((plane * g.kh + i) * g.kw + j) * L;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t h = oh * g.sh - g.ph + i;
            if (h < 0 || h >= g.H) continue;
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t w = ow * g.sw - g.pw + j;
              if (w >= 0 && w < g.W) image[h * g.W + w] += in[oh * g.OW + ow];
            }
          }
        }
    }
  });
}

}  // namespace

// ----------------------------------------------------------------------------
// unfold (im2col)
//   forward:   cols[b, (c*kh + i)*kw + j, oh*OW + ow] = x[b, c, oh*sh - ph + i, ow*sw - pw + j]
//              (0 in the padding); x (B, C, H, W) -> (B, C*kh*kw, OH*OW),
//              OH = (H + 2 ph - kh) / sh + 1, OW likewise
//   backward:  grad_x = fold(grad, (H, W), kernel, stride, padding)      saves nothing
struct UnfoldBackward final : Node {
  Window g;
  explicit UnfoldBackward(const Window& w) : g(w) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {fold(grad, {g.H, g.W}, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw})};
  }
  const char* name() const override { return "UnfoldBackward"; }
};

Tensor unfold(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding) {
  inspect::OpScope op_scope("unfold", {&x});
  if (x.dim() != 4)
    throw ShapeError(
        fmt::format("unfold: expects a (B, C, H, W) input, got shape {}", shape_str(x.shape())));
  const Window g =
      window("unfold", x.size(0), x.size(1), {x.size(2), x.size(3)}, kernel, stride, padding);
  Tensor cols = empty({g.B, g.rows(), g.cols()}, x.dtype());
  const Tensor xc = x.detach().contiguous();
  dispatch_float(x.dtype(), "unfold", [&](auto tag) {
    using T = decltype(tag);
    im2col(xc.data_ptr<T>(), cols.data_ptr<T>(), g);
  });
  if (auto node = make_node<UnfoldBackward>({&x}, g)) set_history(cols, node);
  return cols;
}

// ----------------------------------------------------------------------------
// fold (col2im), the adjoint of unfold
//   forward:   x[b, c, h, w] = sum of the cols entries unfold would read from (b, c, h, w)
//              cols (B, C*kh*kw, L) -> x (B, C, H, W), L = OH*OW
//   backward:  grad_cols = unfold(grad, kernel, stride, padding)      saves nothing
struct FoldBackward final : Node {
  Window g;
  explicit FoldBackward(const Window& w) : g(w) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {unfold(grad, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw})};
  }
  const char* name() const override { return "FoldBackward"; }
};

Tensor fold(const Tensor& cols, Int2 output_size, Int2 kernel, Int2 stride, Int2 padding) {
  inspect::OpScope op_scope("fold", {&cols});
  if (cols.dim() != 3)
    throw ShapeError(fmt::format("fold: expects a (B, C*kh*kw, L) input, got shape {}",
                                 shape_str(cols.shape())));
  const int64_t kk = kernel[0] * kernel[1];
  if (kk <= 0 || cols.size(1) % kk != 0)
    throw ShapeError(fmt::format("fold: dim 1 of input {} is not a multiple of the kernel size {}",
                                 shape_str(cols.shape()), int2_str(kernel)));
  const Window g =
      window("fold", cols.size(0), cols.size(1) / kk, output_size, kernel, stride, padding);
  if (cols.size(2) != g.cols())
    throw ShapeError(fmt::format(
        "fold: input {} has {} columns but output size {} with kernel {}, stride {}, padding {} "
        "gives {} x {} = {} windows",
        shape_str(cols.shape()), cols.size(2), int2_str(output_size), int2_str(kernel),
        int2_str(stride), int2_str(padding), g.OH, g.OW, g.cols()));
  Tensor x = zeros({g.B, g.C, g.H, g.W}, cols.dtype());
  const Tensor cc = cols.detach().contiguous();
  dispatch_float(cols.dtype(), "fold", [&](auto tag) {
    using T = decltype(tag);
    col2im(cc.data_ptr<T>(), x.data_ptr<T>(), g);
  });
  if (auto node = make_node<FoldBackward>({&cols}, g)) set_history(x, node);
  return x;
}

// ----------------------------------------------------------------------------
// conv2d (composite)
//   forward:   y = weight.reshape(O, C*kh*kw) @ unfold(x) + bias, viewed as (B, O, OH, OW)
//   backward:  from matmul (grad_weight = sum over b of grad_b @ cols_b^T, grad_cols =
//              W^T @ grad), unfold (grad_x = fold(grad_cols)) and add (grad_bias = sum of grad)
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Int2 stride,
              Int2 padding) {
  inspect::OpScope op_scope("conv2d", {&x, &weight, &bias});
  if (x.dim() != 4 || weight.dim() != 4 || x.size(1) != weight.size(1))
    throw ShapeError(fmt::format(
        "conv2d: expects x (B, C, H, W) and weight (O, C, kh, kw) with the same C, got {} and {}",
        shape_str(x.shape()), shape_str(weight.shape())));
  if (!is_floating(x.dtype()) || x.dtype() != weight.dtype() ||
      (bias.defined() && bias.dtype() != x.dtype()))
    throw DTypeError(fmt::format("conv2d: expects one floating dtype, got x {}, weight {}, bias {}",
                                 dtype_name(x.dtype()), dtype_name(weight.dtype()),
                                 bias.defined() ? dtype_name(bias.dtype()) : "none"));
  const int64_t B = x.size(0), O = weight.size(0);
  if (bias.defined() && bias.shape() != Shape{O})
    throw ShapeError(fmt::format("conv2d: bias has shape {} but weight {} needs ({},)",
                                 shape_str(bias.shape()), shape_str(weight.shape()), O));
  const Int2 kernel = {weight.size(2), weight.size(3)};
  const Window g = window("conv2d", B, x.size(1), {x.size(2), x.size(3)}, kernel, stride, padding);
  op_scope.count_flops([&] { return 2 * B * O * g.cols() * g.rows(); });  // the product's
  Tensor cols = unfold(x, kernel, stride, padding);                       // (B, C*kh*kw, L)
  Tensor y = matmul(weight.reshape({O, g.rows()}), cols).view({B, O, g.OH, g.OW});
  return bias.defined() ? add(y, bias.view({O, 1, 1})) : y;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding) {
  return conv2d(x, weight, bias, Int2{stride, stride}, Int2{padding, padding});
}

// ----------------------------------------------------------------------------
// patchify (composite: views and one copy)
//   forward:   y[b, gh*GW + gw, (c*p + i)*p + j] = x[b, c, gh*p + i, gw*p + j], i.e.
//              x.reshape(B, C, GH, p, GW, p).permute(0, 2, 4, 1, 3, 5).reshape(B, N, C*p*p)
//   backward:  the inverse permutation (from reshape's and permute's backward)
Tensor patchify(const Tensor& x, int64_t p) {
  inspect::OpScope op_scope("patchify", {&x});
  if (x.dim() != 4)
    throw ShapeError(
        fmt::format("patchify: expects a (B, C, H, W) input, got shape {}", shape_str(x.shape())));
  if (p <= 0 || x.size(2) % p != 0 || x.size(3) % p != 0)
    throw ShapeError(fmt::format(
        "patchify: image size ({}, {}) of input {} is not divisible by the patch size {}",
        x.size(2), x.size(3), shape_str(x.shape()), p));
  const int64_t B = x.size(0), C = x.size(1), GH = x.size(2) / p, GW = x.size(3) / p;
  return x.reshape({B, C, GH, p, GW, p})
      .permute({0, 2, 4, 1, 3, 5})
      .reshape({B, GH * GW, C * p * p});
}

// unpatchify: the inverse view chain, (B, N, C*p*p) -> (B, C, H, W)
Tensor unpatchify(const Tensor& patches, int64_t p, int64_t H, int64_t W) {
  inspect::OpScope op_scope("unpatchify", {&patches});
  if (p <= 0 || H % p != 0 || W % p != 0 || patches.dim() != 3 ||
      patches.size(1) != (H / p) * (W / p) || patches.size(2) % (p * p) != 0)
    throw ShapeError(fmt::format(
        "unpatchify: input {} is not (B, (H/p)*(W/p), C*p*p) for patch size {} and image ({}, {})",
        shape_str(patches.shape()), p, H, W));
  const int64_t B = patches.size(0), C = patches.size(2) / (p * p), GH = H / p, GW = W / p;
  return patches.reshape({B, GH, GW, C, p, p}).permute({0, 3, 1, 4, 2, 5}).reshape({B, C, H, W});
}

}  // namespace nabla
