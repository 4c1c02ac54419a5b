// Losses with PyTorch's semantics: cross_entropy (fused with log_softmax), nll_loss, mse_loss and
// binary_cross_entropy_with_logits, plus composite twins built from primitive ops for the tests.
#pragma once
#include "nabla/core/tensor.h"

namespace nabla {

enum class Reduction { None, Mean, Sum };

struct CrossEntropyOptions {
  int64_t ignore_index = -100;  // targets equal to this contribute nothing (index targets only)
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::Mean;
};

struct NllLossOptions {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

// logits (N, C) or (N, C, d1, ...) or (C,). target is either int64 class indices (N, d1, ...)
// or float class probabilities with logits' shape. Mean averages over non-ignored targets
// (index targets) or over N * d1 * ... (probability targets).
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& opts = {});
// -log_probs[n, target[n], ...], same shapes and ignore_index rule as cross_entropy.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& opts = {});
// (a - b)^2 reduced; a and b must have the same shape.
Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction = Reduction::Mean);
// -[pos_weight * t * log sigmoid(x) + (1 - t) * log(1 - sigmoid(x))] in a form that never
// overflows; target has logits' shape, pos_weight (optional) broadcasts to it.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean,
                                        const Tensor& pos_weight = Tensor());

// Composite twins (primitive ops only), for tests and as readable definitions.
Tensor cross_entropy_composite(const Tensor& logits, const Tensor& target,
                               const CrossEntropyOptions& opts = {});
Tensor mse_loss_composite(const Tensor& a, const Tensor& b, Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits_composite(const Tensor& logits, const Tensor& target,
                                                  Reduction reduction = Reduction::Mean,
                                                  const Tensor& pos_weight = Tensor());

}  // namespace nabla
