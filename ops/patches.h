// Image patches: patchify/unpatchify (ViT) and unfold/fold (im2col/col2im, as F.unfold/F.fold).
// Images are (B, C, H, W); sizes given as std::array<int64_t, 2> are (height, width). The
// convolutions are in ops/conv.h.
#pragma once
#include <array>
#include <cstdint>

#include "nabla/core/tensor.h"

namespace nabla {

// (B, C, H, W) -> (B, N, C*p*p), N = (H/p)*(W/p) row-major over the patch grid, each patch
// flattened as (C, p, p): the input Conv2d(C, D, kernel=p, stride=p) sees. H, W divisible by p.
Tensor patchify(const Tensor& x, int64_t p);
// The inverse: (B, N, C*p*p) -> (B, C, H, W).
Tensor unpatchify(const Tensor& patches, int64_t p, int64_t H, int64_t W);

// (B, C, H, W) -> (B, C*kh*kw, L): column l holds the (C, kh, kw) window of output position l
// (row-major over the OH x OW output grid); zero padding; taps `dilation` pixels apart.
Tensor unfold(const Tensor& x, std::array<int64_t, 2> kernel,
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
              std::array<int64_t, 2> dilation = {1, 1});
// The adjoint of unfold: (B, C*kh*kw, L) -> (B, C, H, W), overlapping entries summed.
Tensor fold(const Tensor& cols, std::array<int64_t, 2> output_size, std::array<int64_t, 2> kernel,
            std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
            std::array<int64_t, 2> dilation = {1, 1});

}  // namespace nabla
