// The convolution's tuned kernels (the reference is the plain loop over taps in ops/conv.cpp):
// im2col + GEMM one sample at a time. The old conv2d unfolded the whole batch into one column
// tensor (B, C*kh*kw, OH*OW), kept it for the weight gradient and added the bias in another pass;
// in the small-CNN bench (batch 128, 16 -> 32 channels, 3x3 over 28x28, stride 2) that buffer
// is 14.5 MB of float32 written, read by the GEMM and held until the backward, and the input
// gradient went through another one like it. Here the columns of one sample (of one group, with
// groups; 113 KB there) are made into a per-thread buffer that stays in L2, its GEMM writes
// straight into the (B, O, OH, OW) output over the bias copied in, and the backward rebuilds the
// columns from x instead of saving them; the weight gradient accumulates into one
// (O, C/G*kh*kw) block per thread (GEMM beta = 1), and the input gradient's columns go through
// the same small buffer into col2im. A 1x1 kernel with stride 1 and no padding needs no columns
// at all: the sample is its own column matrix. The (sample, group) pairs are split across
// threads (depthwise convolutions of one image too); a single pair leaves the threads to its GEMM.
// Measured with callgrind (not timed yet; docs/perf.md): that CNN's training step misses a
// simulated 2 MB L2 on 1.76M lines instead of 3.62M, for 2.6% more instructions (AMD EPYC host,
// dev build, OpenBLAS on its Haswell kernels, 1 thread).
#pragma once
#include "nabla/core/tensor.h"
#include "nabla/ops/im2col.h"

namespace nabla {

// A convolution's checked geometry: the window over the (B, C, H, W) input (conv1d is the
// H = 1 case) and the output channels O, in `groups` groups.
struct ConvGeometry {
  Window win;
  int64_t O = 0, groups = 1;
  int64_t in_group() const { return win.C / groups; }                    // C/G
  int64_t out_group() const { return O / groups; }                       // O/G
  int64_t taps() const { return in_group() * win.kh * win.kw; }          // K_g = C/G*kh*kw
  int64_t flops() const { return 2 * win.B * O * win.cols() * taps(); }  // forward
};

namespace kernels {

// y (B, O, OH, OW) = conv(x, weight) + bias. x (B, C, H, W) and weight (O, C/G, kh, kw)
// contiguous, bias (O) contiguous or undefined, y allocated.
void conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                    const ConvGeometry& g);

// Gradients from grad_y (B, O, OH, OW), all contiguous; each of grad_x (x's shape), grad_weight
// (weight's shape) and grad_bias (O) is written when defined.
void conv2d_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                     const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                     const ConvGeometry& g);

}  // namespace kernels
}  // namespace nabla
