// Convolutions, as torch.nn.functional.conv1d / conv2d: the same arguments in the same order,
// stride, zero padding (sizes, "same" or "valid"), dilation and groups (depthwise when groups
// equals the input channels), float32 and float64. An input without the batch dim ((C, L) or
// (C, H, W)) gives an output without it, as in PyTorch.
#pragma once
#include <cstdint>

#include "nabla/core/tensor.h"
#include "nabla/ops/window_args.h"

namespace nabla {

// x (B, C, H, W), weight (O, C/groups, kh, kw), bias (O,) or undefined -> (B, O, OH, OW) with
// OH = (H + pad_top + pad_bottom - dilation*(kh - 1) - 1) / stride + 1 (OW likewise). Output
// channel o sees the input channels of its group, o / (O/groups).
//   conv2d(x, w, b, 1, 1)                        3x3 "same" the classic way
//   conv2d(x, w, b, 1, "same", 2)                dilated
//   conv2d(x, w, b, 2, {1, 0}, 1, x.size(1))     depthwise, stride 2
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Size2 stride = 1, ConvPadding<2> padding = 0, Size2 dilation = 1, int64_t groups = 1);

// x (B, C, L), weight (O, C/groups, k), bias (O,) or undefined -> (B, O, OL).
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, ConvPadding<1> padding = 0, int64_t dilation = 1,
              int64_t groups = 1);

// conv2d built from unfold, matmul and add (the readable definition, and a second oracle for the
// tests): y = weight_g (O/G, C/G*kh*kw) @ unfold(x)_g per group g, + bias.
Tensor conv2d_composite(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        Size2 stride = 1, ConvPadding<2> padding = 0, Size2 dilation = 1,
                        int64_t groups = 1);

}  // namespace nabla
