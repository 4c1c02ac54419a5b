// scaled_dot_product_attention's tuned kernels (the reference is the per-query loop in
// ops/attention.cpp). Flash-style, after FlashAttention-2 (Dao, 2023):
// Forward, per query tile: an online softmax over key tiles. With m the running row max and l the
//   running sum: acc = acc * exp(m_old - m) + (exp(s - m) * Z) V;  O = acc / l;  lse = m + log l.
// Backward, per head: D = rowsum(dO * O), then per (key tile, query tile): P = exp(s - lse),
//   dV += (P Z)^T dO, dP = (dO V^T) Z, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q.
// Only score tiles of 64 queries x 256 keys (fewer keys where the L2 is small: the machine
// profile, core/machine.h) live at a time, so memory is linear in L and S; the
// products are single-threaded BLAS calls, and the dropout words of a tile come from one
// Generator::blocks call (vectorised Philox). Every operand is read and written in place through
// its strides. Measured against the composite that materialises the weights, forward + backward
// (Intel Xeon host, AVX-512, 2 threads, commit c8b0171, docs/perf.md): 8 heads x 2048 x 64,
// 132 vs 254 ms and 20 vs 396 MB of extra memory; 128 x 256 x 32, 19 vs 27 ms; on short heads
// (T = 50-64) 1.3-1.4x slower, since the backward recomputes scores and dropout words. One
// Generator::blocks call per tile spanning every key: vit_small's step 128 -> 94 ms (AMD EPYC
// host, commit df60587).
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::kernels {

// The sizes and switches of one call. N is the product of the leading dims.
struct SdpaProblem {
  int64_t N = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1, p = 0;
  bool causal = false;
  uint64_t seed = 0, first = 0;  // dropout counters, as dropout() would reserve them
};

// Whether a call's products run on kernels/small_gemm.h instead of one BLAS call each: L and S at
// most the machine profile's attention_small_max_tokens, E and Ev at most its
// attention_small_max_head_dim (core/machine.h). The same tiles, math and saved tensors either way.
bool uses_small_kernel(const SdpaProblem& pr);

// Element offsets of each of the N leading-dim slices of t (any strides, including 0).
std::vector<int64_t> slice_offsets(const Tensor& t, int64_t N);

// out (..., L, Ev) and lse (N, L). q (..., L, E), k (..., S, E), v (..., S, Ev) and out are
// row-major matrices per slice that BLAS reads in place (blas::as_readable); mask is undefined,
// bool (keep) or additive, broadcasting to (..., L, S).
void sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                  const SdpaProblem& pr, const Tensor& out, const Tensor& lse);

// dq, dk, dv (laid out like q, k, v) from the forward's out and lse and the output gradient.
void sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                   const SdpaProblem& pr, const Tensor& out, const Tensor& lse, const Tensor& grad,
                   const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace nabla::kernels
