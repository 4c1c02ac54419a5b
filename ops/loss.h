// Losses with PyTorch's semantics: cross_entropy (fused with log_softmax), nll_loss, mse_loss,
// binary_cross_entropy_with_logits and kl_div, plus composite twins built from primitive ops for
// the tests, and the distillation loss of Hinton et al. 2015 built on kl_div.
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

// kl_div's reductions, PyTorch's strings. Mean divides the sum by every element (batch x
// support), which is not the KL divergence (PyTorch warns on 'mean' for that reason; nabla
// documents it here instead); BatchMean divides it by input.size(0), the KL definition, and is
// Sum for a 0-d input.
enum class KlDivReduction { None, Mean, Sum, BatchMean };

struct KlDivOptions {
  KlDivReduction reduction = KlDivReduction::Mean;
  bool log_target = false;  // target holds log-probabilities (stable when they underflow)
};

// Pointwise KL(target || exp(input)) with input log-probabilities, torch.nn.functional.kl_div:
// target * (log target - input), 0 where target == 0 (log_target: exp(t) * (t - input)).
// input and target broadcast. The gradient wrt a target of exactly 0 is -inf (PyTorch: NaN).
Tensor kl_div(const Tensor& input, const Tensor& target, const KlDivOptions& opts = {});

// Knowledge distillation (Hinton, Vinyals, Dean 2015, "Distilling the Knowledge in a Neural
// Network", arXiv:1503.02531): alpha * T^2 * KL(softmax(t/T) || softmax(s/T)) (batchmean) +
// (1 - alpha) * cross_entropy(s, labels). T^2 keeps the soft term's gradient scale independent
// of T. logits (N, C), labels int64 (N,); teacher_logits are not detached here: compute them
// without grad.
Tensor distillation_loss(const Tensor& student_logits, const Tensor& teacher_logits,
                         const Tensor& labels, double temperature, double alpha);

// Composite twins (primitive ops only), for tests and as readable definitions.
Tensor cross_entropy_composite(const Tensor& logits, const Tensor& target,
                               const CrossEntropyOptions& opts = {});
Tensor mse_loss_composite(const Tensor& a, const Tensor& b, Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits_composite(const Tensor& logits, const Tensor& target,
                                                  Reduction reduction = Reduction::Mean,
                                                  const Tensor& pos_weight = Tensor());
Tensor kl_div_composite(const Tensor& input, const Tensor& target, const KlDivOptions& opts = {});

}  // namespace nabla
