// Drawing tokens: multinomial sampling from a Generator, and the filters a text generator applies
// to next-token logits before it samples (temperature, top-k, top-p). The filters work along the
// last dim of logits of shape (V) or (B, V) (any leading dims), float32 or float64, and are
// differentiable where they keep a logit (a removed one becomes -inf and gets no gradient).
#pragma once
#include <cstdint>

#include "nabla/core/generator.h"
#include "nabla/core/tensor.h"

namespace nabla {

// num_samples category indices (int64) per row of probs, shape (V) -> (num_samples) or
// (B, V) -> (B, num_samples), as torch.multinomial. Rows are weights: non-negative, finite, not
// all zero, not necessarily normalised. With replacement every draw sees the whole row; without,
// the draws are distinct and come in the order successive draws would (each proportional to the
// weights not yet drawn), so num_samples may not exceed a row's number of non-zero weights.
// Draws come from gen's Philox stream (gen advances by B * num_samples counters with
// replacement, B * V without): the same seed gives the same draws, and a generator restored
// from a checkpoint (seed, offset) continues the stream.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& gen);
// The same from the default generator (core/generator.h).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

// logits / temperature; temperature must be finite and > 0 (below 1 sharpens, above flattens).
Tensor apply_temperature(const Tensor& logits, double temperature);

// Keeps each logit that is >= the k-th largest of its row and sets the others to -inf, as
// Hugging Face transformers' TopKLogitsWarper (ties with the k-th value are all kept). k >= 1;
// k >= V keeps everything.
Tensor top_k_filter(const Tensor& logits, int64_t k);

// Nucleus filtering (Holtzman et al., "The Curious Case of Neural Text Degeneration", ICLR
// 2020), exactly as transformers' TopPLogitsWarper: sort a row ascending (stably), take the
// running sum of its softmax, and set to -inf every logit whose running sum is <= 1 - p; the
// largest logit is always kept. What remains is the smallest set of the most likely tokens whose
// probability reaches p. 0 < p <= 1 (p = 1 removes only tokens of probability exactly 0).
Tensor top_p_filter(const Tensor& logits, double p);

}  // namespace nabla
