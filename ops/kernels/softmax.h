// Tuned kernels of the softmax family. ops/softmax.cpp holds each op (its math, backward node and
// the plain reference kernel these must agree with); tests/ops/test_softmax_kernels.cpp compares
// the two. What is tuned: float32 exps through vec_math's vectorisable exp (libm's expf is one
// opaque call per element), the row max and sums as `omp simd` reductions across vector lanes,
// float32 softmax sums in float lanes (double lanes ran at half the width), rows split across
// threads. Measured on 2 threads: softmax forward 2048x512 1.91 -> 0.25 ms with the vectorised
// exp (AMD EPYC host, commit be6995a); float lanes 32x4x64x64 forward 0.19 -> 0.17 ms (Intel
// Xeon AVX-512 host, commit c8b0171). Inputs are contiguous and detached; outputs preallocated.
#pragma once
#include "nabla/core/tensor.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/row_layout.h"

namespace nabla::kernels {

// y = softmax(x), or log_softmax(x) if `log`, along the rows of l.
void softmax_forward(const Tensor& x, Tensor& y, const RowLayout& l, bool log);

// grad_x from the saved output y and the incoming grad, along the rows of l:
// softmax: grad_x = y (grad - sum(grad y)); log_softmax: grad_x = grad - exp(y) sum(grad).
void softmax_backward(const Tensor& y, const Tensor& grad, Tensor& grad_x, const RowLayout& l,
                      bool log);

// Position k of a masked row takes part in its softmax: kept (keep == nullptr keeps all) and
// z[k] > -inf.
template <class T>
bool is_live(const T* z, const bool* keep, int64_t k) {
  return (keep == nullptr || keep[k]) && z[k] != kNegInf<T>;
}

// Softmax over the last dim (rows of n) of the logits z, over the live positions only (kept by
// `keep`, undefined when all are kept, and z > -inf); a row with none is all zeros.
void masked_softmax_forward(const Tensor& z, const Tensor& keep, Tensor& y, int64_t n);

}  // namespace nabla::kernels
