// The softmax family: softmax, log_softmax and masked_softmax (fused, numerically stable kernels
// with hand-written backward kernels), and their composite twins built from primitive ops, kept
// as references the tests compare the fused versions against.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

// exp(x) / sum(exp(x)) along `dim`; a 0-d x is treated as one element (the result is 1).
Tensor softmax(const Tensor& x, int64_t dim);
// x - logsumexp(x) along `dim`, without forming softmax first.
Tensor log_softmax(const Tensor& x, int64_t dim);

// How masked_softmax reads its mask.
enum class MaskKind {
  Bool,      // bool tensor, true = keep, broadcast to x
  Additive,  // float tensor in x's dtype added to the logits (-inf masks), broadcast to x
};

// Softmax over the last dim of x (B, ..., Q, K) keeping only positions k < valid_len.
// valid_lens is int64, either (B,) (one length per batch row) or (B, Q) (one per query).
// A row with no valid position is all zeros (d2l returns a uniform row there instead).
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens);
// Softmax over the last dim of x with a bool or additive mask (see MaskKind); a fully masked row
// is all zeros with zero gradient. An additive mask that requires grad gets a gradient.
Tensor masked_softmax(const Tensor& x, const Tensor& mask, MaskKind kind);

// Composite twins: the same maths written with primitive ops (exp, sum, div, ...). Slower and
// heavier on memory; kept for tests and as the readable definition.
Tensor softmax_composite(const Tensor& x, int64_t dim);
Tensor log_softmax_composite(const Tensor& x, int64_t dim);
Tensor masked_softmax_composite(const Tensor& x, const Tensor& mask, MaskKind kind);

}  // namespace nabla
