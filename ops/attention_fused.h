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

// dq, dk, dv (laid out like q, k, v) from the forward's out and lse. No autograd.
std::array<Tensor, 3> sdpa_fused_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& mask, const kernels::SdpaProblem& pr,
                                          const Tensor& out, const Tensor& lse, const Tensor& grad);

}  // namespace nabla::detail
