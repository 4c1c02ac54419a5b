// Tuned kernels of layer_norm. ops/layer_norm.cpp holds the op (its math, backward node and the
// plain reference kernel these must agree with); tests/ops/test_layer_norm_kernels.cpp compares
// the two. What is tuned: float32 rows are summed in float across SIMD lanes (double sums ran at
// half the vector width), kept accurate by taking the mean from x minus the row's first element
// and keeping it as a float pair hi + lo; float64 sums are `omp simd` reductions; the backward's
// loops are written once per case (float32/float64, with and without weight) so that no load is
// conditional; the backward is one pass over the rows, grad_x and the weight and bias gradients'
// column sums together, each block of rows summing into a buffer of its own (two threads sharing
// a cache line once made vit_small's LayerNorm backward 3.5x slower). Measured on 2 threads:
// 2048x512 forward 0.94 -> 0.19 ms, forward+backward 2.32 -> 0.75 ms with the first vectorisation
// (AMD EPYC host, commit 8c61ab0); float lanes then forward 0.36 -> 0.26 ms, forward+backward
// 1.27 -> 0.95 ms at 2048x512 and 1.64 -> 0.47 ms at 32x4x64x64 (Intel Xeon AVX-512 host, commit
// 858a134). Inputs are M rows of N contiguous elements, detached; outputs preallocated.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::kernels {

// y = (x - mean) rstd * weight + bias per row (weight, bias: N elements or undefined); each row's
// mean and rstd = 1 / sqrt(var + eps) into mean and rstd (float64, M elements).
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                        int64_t N, Tensor& y, Tensor& mean, Tensor& rstd);

// The rows per block of the weight and bias gradients' column sums: each block sums its rows in
// order, the blocks' sums are added in order. A function of M alone (at most 64 blocks), so the
// bits do not depend on the thread count; the reference kernel sums in the same order.
inline int64_t layer_norm_param_block_rows(int64_t M) {
  return std::max<int64_t>(256, (M + 63) / 64);
}

// One pass over the rows: grad_x = rstd (gy - mean(gy) - xhat mean(gy xhat)) per row, gy = grad
// * weight (when grad_x is given), and the column sums grad_w[j] = sum grad * xhat, grad_b[j] =
// sum grad (N each, double; when grad_w and grad_b are given).
void layer_norm_backward(const Tensor& x, const Tensor& grad, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, int64_t N, Tensor* grad_x,
                         std::vector<double>* grad_w, std::vector<double>* grad_b);

}  // namespace nabla::kernels
