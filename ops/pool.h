// Pooling over the last one or two dims, as torch.nn.functional (same arguments, same order, same
// output sizes): max_pool1d/2d, also with the argmax indices; avg_pool1d/2d;
// adaptive_avg_pool1d/2d. Inputs are (B, C, L) / (B, C, H, W) or without the batch dim, float32
// or float64. A stride left unset ({} or std::nullopt) is the kernel size, as PyTorch's None.
#pragma once
#include <cstdint>
#include <optional>

#include "nabla/core/tensor.h"
#include "nabla/ops/window_args.h"

namespace nabla {

// PyTorch's (output, indices) of return_indices=True. indices (int64, the output's shape) hold
// each maximum's flat position in its input plane (h * W + w; l for 1-D), as PyTorch's do, and
// -1 for a window that holds only padding (its output is -inf).
struct MaxPoolResult {
  Tensor output, indices;
};

// y[.., oh, ow] = max over the taps (i, j) of x[.., oh*sh - ph + i*dh, ow*sw - pw + j*dw],
// padding ignored (it is never the maximum). padding <= kernel_size / 2. A NaN in a window is its
// maximum. ceil_mode rounds the output size up (a last, partial window that starts inside the
// input or its left padding).
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride = {}, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);
MaxPoolResult max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, Size2 stride = {},
                                      Size2 padding = 0, Size2 dilation = 1,
                                      bool ceil_mode = false);
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = {},
                  int64_t padding = 0, int64_t dilation = 1, bool ceil_mode = false);
MaxPoolResult max_pool1d_with_indices(const Tensor& x, int64_t kernel_size,
                                      std::optional<int64_t> stride = {}, int64_t padding = 0,
                                      int64_t dilation = 1, bool ceil_mode = false);

// The mean over each window. The divisor is the window's size clipped to the padded input when
// count_include_pad (PyTorch's default), else the number of input elements it covers.
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride = {}, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = {},
                  int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true);

// Means over output_size windows that tile the input: window o of n inputs into m outputs covers
// [floor(o*n/m), ceil((o+1)*n/m)).
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);

}  // namespace nabla
