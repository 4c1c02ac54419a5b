// Attention scoring modules (d2l 10.3, "Attention Scoring Functions"). Each maps queries
// (B, Q, dq), keys (B, K, dk) and values (B, K, dv) to (B, Q, dv):
// out = dropout(softmax(score(q, k))) @ values, with masked keys removed from the softmax. Each
// keeps the weights of its last forward (before dropout, detached) for inspection and heatmaps.
// The score(q, k) of each:
//   AdditiveAttention       w_v . tanh(W_q q + W_k k)    Bahdanau et al. 2015; dq != dk ok
//   DotProductAttention     q . k / sqrt(d), or q . k    Vaswani et al. 2017, section 3.2.1
//   ConcatLinearAttention   Linear([q; k])               Luong et al. 2015's concat, no tanh
//   ConcatTanhSumAttention  sum(tanh(Linear([q; k])))    Luong et al. 2015's concat, v_a = 1
// LocationBasedAttention is the odd one out: its weights range over a fixed number of value slots
// and come from [q; k] alone (Luong et al. 2015's location-based score).
#pragma once
#include <cstdint>
#include <memory>

#include "nabla/nn/layers.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

// Which keys a query may attend to. Built implicitly from a tensor by its dtype:
//   int64  valid_lens (B,) or (B, Q): key k is kept if k < the length (d2l's convention)
//   bool   keep-mask broadcast to (B, Q, K), true = keep
//   float  additive mask broadcast to (B, Q, K), added to the scores (-inf removes a key)
//   undefined Tensor / default: every key is kept.
// A query whose keys are all masked gets zero weights (a zero output), never NaN.
struct AttentionMask {
  enum class Kind { None, ValidLens, Keep, Additive };
  Kind kind = Kind::None;
  Tensor tensor;

  AttentionMask() = default;
  AttentionMask(Tensor t);  // NOLINT(google-explicit-constructor): dispatches on dtype
  static AttentionMask valid_lens(Tensor lens) { return {Kind::ValidLens, std::move(lens)}; }
  static AttentionMask keep(Tensor mask) { return {Kind::Keep, std::move(mask)}; }
  static AttentionMask additive(Tensor mask) { return {Kind::Additive, std::move(mask)}; }

 private:
  AttentionMask(Kind k, Tensor t) : kind(k), tensor(std::move(t)) {}
};

// Softmax of scores (B, ..., Q, K) over the keys with `mask` applied; `who` names the caller in
// error messages.
Tensor masked_attention_softmax(const Tensor& scores, const AttentionMask& mask, const char* who);

// The optional arguments of the scoring modules with parameters (Additive, ConcatLinear,
// ConcatTanhSum): dropout on the attention weights in training, and the parameters' dtype.
struct AttentionScorerOptions {
  double dropout = 0;
  DType dtype = kFloat32;
};

// Shared by the scoring modules: checks shapes, then weights = masked softmax of the scores,
// kept for attention_weights(), out = dropout(weights) @ values.
class AttentionScorer : public Module {
 public:
  // The weights of the last forward (B, Q, K), detached; undefined before the first call.
  const Tensor& attention_weights() const { return weights_; }
  double dropout_p() const { return dropout_->p(); }

 protected:
  AttentionScorer(std::string type_name, double dropout);
  // queries (B, Q, dq), keys (B, K, dk), values (B, K, dv), one floating dtype. same_d: dq must
  // equal dk; batch_dims: more leading dims than B are allowed (they must agree).
  void check_inputs(const Tensor& queries, const Tensor& keys, const Tensor& values, bool same_d,
                    bool batch_dims = false) const;
  // scores (B, Q, K) -> (B, Q, dv).
  Tensor attend(const Tensor& scores, const Tensor& values, const AttentionMask& mask);

 private:
  std::shared_ptr<Dropout> dropout_;
  Tensor weights_;
};

// d2l's AdditiveAttention: parameters W_k.weight (h, dk), W_q.weight (h, dq), w_v.weight (1, h),
// no biases. The features tanh(W_q q + W_k k) are (B, Q, K, h). Sizes are query first, as in
// forward and the other scorers (d2l's constructor takes key_size first).
class AdditiveAttention : public AttentionScorer {
 public:
  AdditiveAttention(int64_t query_size, int64_t key_size, int64_t num_hiddens,
                    const AttentionScorerOptions& options = {});
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const AttentionMask& mask = {});
  Tensor operator()(const Tensor& queries, const Tensor& keys, const Tensor& values,
                    const AttentionMask& mask = {}) {
    return call(&AdditiveAttention::forward, queries, keys, values, mask);
  }
  // Scores (B, Q, K) before masking.
  Tensor scores(const Tensor& queries, const Tensor& keys) const;

 private:
  std::shared_ptr<Linear> W_k_, W_q_, w_v_;  // NOLINT: d2l's names
};

// Dot-product attention, scaled by 1/sqrt(d) unless scaled = false; needs dq == dk = d. Also
// accepts more leading batch dims: queries (B, ..., Q, d) with keys/values (B, ..., K, *).
class DotProductAttention : public AttentionScorer {
 public:
  explicit DotProductAttention(double dropout = 0, bool scaled = true);
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const AttentionMask& mask = {});
  Tensor operator()(const Tensor& queries, const Tensor& keys, const Tensor& values,
                    const AttentionMask& mask = {}) {
    return call(&DotProductAttention::forward, queries, keys, values, mask);
  }
  Tensor scores(const Tensor& queries, const Tensor& keys) const;
  bool scaled() const { return scaled_; }

 private:
  bool scaled_;
};

// softmax(Linear([Q, K])) V with one score per (query, key) pair: score = w . [q; k] + b, a linear
// score of the concatenation (Luong, Pham and Manning 2015, section 3.1's concat score without
// its tanh); parameter linear.weight (1, dq + dk), linear.bias (1).
// NOTE: softmax is shift-invariant along the keys, so the query's term w_q . q + b is the same for
// every key and cancels: the weights depend on the keys only, and queries get no gradient. That is
// what this score means read pair by pair; LocationBasedAttention instead maps one [q; k] to a
// fixed number of scores at once.
class ConcatLinearAttention : public AttentionScorer {
 public:
  ConcatLinearAttention(int64_t query_size, int64_t key_size,
                        const AttentionScorerOptions& options = {});
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const AttentionMask& mask = {});
  Tensor operator()(const Tensor& queries, const Tensor& keys, const Tensor& values,
                    const AttentionMask& mask = {}) {
    return call(&ConcatLinearAttention::forward, queries, keys, values, mask);
  }
  Tensor scores(const Tensor& queries, const Tensor& keys) const;

 private:
  int64_t query_size_;
  std::shared_ptr<Linear> linear_;
};

// softmax(sum(tanh(Linear([Q, K])))) V, per pair: score = sum_h tanh(W [q; k] + b)_h, parameters
// linear.weight (h, dq + dk), linear.bias (h): Luong et al. 2015's concat score
// v_a . tanh(W_a [q; k]) with v_a fixed to ones and a bias, i.e. additive attention (d2l 10.3.3)
// with w_v = 1.
class ConcatTanhSumAttention : public AttentionScorer {
 public:
  ConcatTanhSumAttention(int64_t query_size, int64_t key_size, int64_t num_hiddens,
                         const AttentionScorerOptions& options = {});
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                 const AttentionMask& mask = {});
  Tensor operator()(const Tensor& queries, const Tensor& keys, const Tensor& values,
                    const AttentionMask& mask = {}) {
    return call(&ConcatTanhSumAttention::forward, queries, keys, values, mask);
  }
  Tensor scores(const Tensor& queries, const Tensor& keys) const;

 private:
  int64_t query_size_;
  std::shared_ptr<Linear> linear_;
};

// Location-based attention with an output layer, as in the attention decoder (AttnDecoderRNN) of
// PyTorch's tutorial "NLP From Scratch: Translation with a Sequence to Sequence Network and
// Attention": attn = Linear(query_size + key_size, value_size1) turns [q; k] into weights over
// value_size1 fixed slots of V at once, without comparing q to the values (Luong, Pham and
// Manning 2015, section 3.1: a = softmax(W_a h)); attn_combine = Linear(query_size + value_size2,
// output_size) joins the query and the weighted values.
//   Q (1, N, query_size), K (1, N, key_size), V (1, value_size1, value_size2)
//   -> output (1, N, output_size), weights (N, value_size1). The tutorial uses N = 1.
// Five sizes, so they are named: LocationBasedAttention({.query_size = 32, .key_size = 32,
// .value_size1 = 10, .value_size2 = 32, .output_size = 32}); each must be set (> 0).
struct LocationBasedAttentionOptions {
  int64_t query_size = 0, key_size = 0;
  int64_t value_size1 = 0;  // the number of value slots (V's dim 1)
  int64_t value_size2 = 0;  // each slot's size (V's dim 2)
  int64_t output_size = 0;
  DType dtype = kFloat32;
};

class LocationBasedAttention : public Module {
 public:
  struct Result {
    Tensor output;   // (1, N, output_size)
    Tensor weights;  // (N, value_size1), with history
    friend std::vector<Tensor*> module_outputs(Result& r) { return {&r.output, &r.weights}; }
  };
  explicit LocationBasedAttention(const LocationBasedAttentionOptions& options);
  Result forward(const Tensor& Q, const Tensor& K, const Tensor& V) const;
  Result operator()(const Tensor& Q, const Tensor& K, const Tensor& V) const {
    return call(&LocationBasedAttention::forward, Q, K, V);
  }

 private:
  int64_t query_size_, key_size_, value_size1_, value_size2_;
  std::shared_ptr<Linear> attn_, attn_combine_;
};

}  // namespace nabla::nn
