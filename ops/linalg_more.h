// More matrix products and vector geometry (PyTorch semantics): bmm baddbmm addmm outer,
// cosine_similarity, normalize. The products run on matmul (one GEMM path, ops/gemm.cpp).
#pragma once
#include <cstdint>

#include "nabla/core/tensor.h"

namespace nabla {

// (B, N, M) @ (B, M, P) -> (B, N, P); no broadcasting (use matmul for that).
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * input + alpha * bmm(b1, b2); input broadcasts to (B, N, P). With beta = 0 input is
// ignored (its NaN and inf do not propagate), as torch.
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1.0,
               double alpha = 1.0);
// beta * input + alpha * (m1 @ m2) for 2-D m1 (N, M), m2 (M, P); input broadcasts to (N, P).
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1.0,
             double alpha = 1.0);
// a (N) and b (M) -> (N, M) with y[i][j] = a[i] * b[j]. float32, float64, int64.
Tensor outer(const Tensor& a, const Tensor& b);

// sum(x1 * x2) / sqrt(max(|x1|^2, eps^2) * max(|x2|^2, eps^2)) along dim, x1 and x2 broadcast
// together (torch 1.13's formula; the clamp does not stop the squared norms' gradient, as in
// torch).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// x / max(||x||_p, eps) along dim, p > 0 (inf too). The norm's gradient is 0 at a zero vector,
// as torch's.
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

}  // namespace nabla
