// What the pooling ops share (ops/pool.cpp, ops/avg_pool.cpp): the input seen as planes
// (P, H, W), and one spatial axis's window geometry with PyTorch's output-size rule. Internal to
// ops/: not included by nabla.h.
#pragma once
#include <cstdint>
#include <string>

#include "nabla/core/tensor.h"

namespace nabla {

// x as planes x3 (P, H, W): P = B*C (or C without the batch dim); a 1-D input has H = 1.
struct PoolInput {
  Tensor x3;
  Shape lead;  // the dims before the spatial ones
  int spatial = 2;
  int64_t H = 1, W = 1;
  // (P, OH, OW) back to the caller's layout: lead + (OH, OW), or lead + (OL,).
  Tensor to_caller(const Tensor& y3) const;
};

// Checks the rank ((B, C, *spatial) or (C, *spatial)) and the dtype (float32 or float64).
PoolInput pool_input(const char* op, const Tensor& x, int spatial);

// One axis of a sliding pool: window o starts at o*stride - pad and has `kernel` taps `dilation`
// apart; `out` windows.
struct PoolAxis {
  int64_t in = 0, kernel = 1, stride = 1, pad = 0, dilation = 1, out = 0;
};

// Checks the arguments for `op` over input `x` (named in the errors; `dims` = "height",
// "width" or "length") and computes the output size by PyTorch's pooling_output_shape.
// `max_pad` is the largest padding allowed (PyTorch: half the kernel).
PoolAxis pool_axis(const char* op, const Tensor& x, const char* dims, int64_t in, int64_t kernel,
                   int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode, int64_t max_pad);

}  // namespace nabla
