// Image patches. patchify/unpatchify are reshapes and permutes: their backward comes from the
// views. unfold and fold check their arguments here and run on the window geometry of
// ops/im2col.h, where they are recorded as each other's backward.
#include "nabla/ops/patches.h"

#include <fmt/format.h>

#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/im2col.h"

namespace nabla {

// ----------------------------------------------------------------------------
// unfold (im2col): see unfold_window in ops/im2col.cpp for the formula and the backward
Tensor unfold(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding, Int2 dilation) {
  inspect::OpScope op_scope("unfold", {&x});
  if (x.dim() != 4)
    throw ShapeError(
        fmt::format("unfold: expects a (B, C, H, W) input, got shape {}", shape_str(x.shape())));
  const Window g = make_window("unfold", x.size(0), x.size(1), {x.size(2), x.size(3)},
                               {kernel, stride, padding, padding, dilation});
  return unfold_window(x, g);
}

// ----------------------------------------------------------------------------
// fold (col2im), the adjoint of unfold: see fold_window in ops/im2col.cpp
Tensor fold(const Tensor& cols, Int2 output_size, Int2 kernel, Int2 stride, Int2 padding,
            Int2 dilation) {
  inspect::OpScope op_scope("fold", {&cols});
  if (cols.dim() != 3)
    throw ShapeError(fmt::format("fold: expects a (B, C*kh*kw, L) input, got shape {}",
                                 shape_str(cols.shape())));
  int64_t kk = 0;
  if (kernel[0] <= 0 || kernel[1] <= 0 || __builtin_mul_overflow(kernel[0], kernel[1], &kk) ||
      cols.size(1) % kk != 0)
    throw ShapeError(fmt::format("fold: dim 1 of input {} is not a multiple of the kernel size {}",
                                 shape_str(cols.shape()), int2_str(kernel)));
  const Window g = make_window("fold", cols.size(0), cols.size(1) / kk, output_size,
                               {kernel, stride, padding, padding, dilation});
  if (cols.size(2) != g.cols())
    throw ShapeError(fmt::format(
        "fold: input {} has {} columns but output size {} with kernel {}, stride {}, padding {}, "
        "dilation {} gives {} x {} = {} windows",
        shape_str(cols.shape()), cols.size(2), int2_str(output_size), int2_str(kernel),
        int2_str(stride), int2_str(padding), int2_str(dilation), g.OH, g.OW, g.cols()));
  return fold_window(cols, g);
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
