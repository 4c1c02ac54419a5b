// The fused attention kernels of ops/attention.cpp without autograd, for an op that records its
// own node around them (autocast's attention saves bf16 copies instead of q, k, v). Internal to
// ops/: not included by nabla.h.
#pragma once
#include <array>

#include "nabla/core/tensor.h"
#include "nabla/ops/attention.h"
#include "nabla/ops/kernels/attention.h"

namespace nabla::detail {

// Checks the call as scaled_dot_product_attention does (same errors) and fills its sizes.
kernels::SdpaProblem sdpa_problem(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const SdpaOptions& options);

struct SdpaForward {
  Tensor out, lse;  // out (..., L, Ev) laid out like q; lse (N, L)
};
// Reserves the dropout counters in pr (from options.generator) and runs the tuned or the
// reference forward kernel. No autograd.
SdpaForward sdpa_fused_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const SdpaOptions& options, kernels::SdpaProblem& pr);

// Reserves pr's dropout counters (when pr.p > 0) from options.generator, as the forward does.
void sdpa_reserve_dropout(const SdpaOptions& options, kernels::SdpaProblem& pr);

// The forward on contiguous bfloat16 q16, k16, v16 with both products on oneDNN's bf16 matmul
// (ops/attention_bf16.cpp): out (..., L, Ev) contiguous float32, lse (N, L) float32; mask bool
// or additive (float32 or bfloat16). pr's dropout counters must be reserved. No autograd.
void sdpa_forward_bf16(const Tensor& q16, const Tensor& k16, const Tensor& v16, const Tensor& mask,
                       const kernels::SdpaProblem& pr, const Tensor& out, const Tensor& lse);

// dq, dk, dv (laid out like q, k, v) from the forward's out and lse. No autograd.
std::array<Tensor, 3> sdpa_fused_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& mask, const kernels::SdpaProblem& pr,
                                          const Tensor& out, const Tensor& lse, const Tensor& grad);

}  // namespace nabla::detail
