// Image patches and 2-D convolution: patchify/unpatchify (ViT), unfold/fold (im2col/col2im, as
// F.unfold/F.fold with dilation 1) and conv2d via im2col + matmul. Images are (B, C, H, W);
// sizes given as std::array<int64_t, 2> are (height, width).
#pragma once
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace nabla {

// (B, C, H, W) -> (B, N, C*p*p), N = (H/p)*(W/p) row-major over the patch grid, each patch
// flattened as (C, p, p): the input Conv2d(C, D, kernel=p, stride=p) sees. H, W divisible by p.
Tensor patchify(const Tensor& x, int64_t p);
// The inverse: (B, N, C*p*p) -> (B, C, H, W).
Tensor unpatchify(const Tensor& patches, int64_t p, int64_t H, int64_t W);

// (B, C, H, W) -> (B, C*kh*kw, L): column l holds the (C, kh, kw) window of output position l
// (row-major over the OH x OW output grid); zero padding.
Tensor unfold(const Tensor& x, std::array<int64_t, 2> kernel,
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});
// The adjoint of unfold: (B, C*kh*kw, L) -> (B, C, H, W), overlapping entries summed.
Tensor fold(const Tensor& cols, std::array<int64_t, 2> output_size, std::array<int64_t, 2> kernel,
            std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});

// x (B, C, H, W), weight (O, C, kh, kw), bias (O) or undefined -> (B, O, OH, OW), like F.conv2d
// (no groups, no dilation).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0});
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding = 0);

}  // namespace nabla
