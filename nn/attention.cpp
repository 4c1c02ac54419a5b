// Attention scoring modules. Every score is built from differentiable ops (linear, tanh, matmul,
// sum), and the weights come from the fused masked_softmax, so gradients of any order flow
// through everything but the mask.
#include "nabla/nn/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nabla/core/error.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/shape.h"
#include "nabla/ops/softmax.h"
#include "nabla/ops/unary.h"

namespace nabla::nn {

// ----------------------------------------------------------------------------
// AttentionMask and the masked softmax over keys

AttentionMask::AttentionMask(Tensor t) : tensor(std::move(t)) {
  if (!tensor.defined()) return;
  if (tensor.dtype() == kInt64) {
    kind = Kind::ValidLens;
  } else if (tensor.dtype() == kBool) {
    kind = Kind::Keep;
  } else {
    kind = Kind::Additive;
  }
}

Tensor masked_attention_softmax(const Tensor& scores, const AttentionMask& mask, const char* who) {
  using Kind = AttentionMask::Kind;
  const Tensor& m = mask.tensor;
  if (mask.kind == Kind::None || !m.defined()) return softmax(scores, -1);
  if (mask.kind == Kind::ValidLens) {
    // scores (B, ..., Q, K); valid_lens (B,) or (B, Q)
    const int64_t nd = scores.dim();
    const bool ok =
        m.dtype() == kInt64 && nd >= 2 &&
        ((m.dim() == 1 && m.size(0) == scores.size(0)) ||
         (m.dim() == 2 && nd >= 3 && m.size(0) == scores.size(0) && m.size(1) == scores.size(-2)));
    if (!ok)
      throw ShapeError(fmt::format(
          "{}: valid_lens must be int64 (B,) or (B, Q) for scores (B, Q, K) = {}, got {} {}", who,
          shape_str(scores.shape()), dtype_name(m.dtype()), shape_str(m.shape())));
    return masked_softmax(scores, m);
  }
  const bool keep = mask.kind == Kind::Keep;
  if (keep ? m.dtype() != kBool : m.dtype() != scores.dtype())
    throw DTypeError(fmt::format(
        "{}: {} mask must have dtype {}, got {} {}", who, keep ? "a keep" : "an additive",
        keep ? "bool" : dtype_name(scores.dtype()), dtype_name(m.dtype()), shape_str(m.shape())));
  bool broadcasts = m.dim() <= scores.dim();
  for (int64_t i = 1; broadcasts && i <= m.dim(); ++i)
    broadcasts = m.size(-i) == 1 || m.size(-i) == scores.size(-i);
  if (!broadcasts)
    throw ShapeError(fmt::format("{}: mask {} does not broadcast to the scores (B, Q, K) = {}", who,
                                 shape_str(m.shape()), shape_str(scores.shape())));
  return masked_softmax(scores, m, keep ? MaskKind::Bool : MaskKind::Additive);
}

// ----------------------------------------------------------------------------
// AttentionScorer: shape checks and the softmax-dropout-matmul tail every module shares

AttentionScorer::AttentionScorer(std::string type_name, double dropout)
    : Module(std::move(type_name)) {
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout));
}

void AttentionScorer::check_inputs(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                   bool same_d, bool batch_dims) const {
  const std::string& who = name();
  if (!is_floating(queries.dtype()) || keys.dtype() != queries.dtype() ||
      values.dtype() != queries.dtype())
    throw DTypeError(fmt::format(
        "{}: queries, keys and values must share one floating dtype, got {} {}, {} {}, {} {}", who,
        dtype_name(queries.dtype()), shape_str(queries.shape()), dtype_name(keys.dtype()),
        shape_str(keys.shape()), dtype_name(values.dtype()), shape_str(values.shape())));
  const int64_t nd = queries.dim();
  bool ok = (batch_dims ? nd >= 3 : nd == 3) && keys.dim() == nd && values.dim() == nd &&
            keys.size(-2) == values.size(-2) && (!same_d || queries.size(-1) == keys.size(-1));
  for (int64_t d = 0; ok && d < nd - 2; ++d)
    ok = keys.size(d) == queries.size(d) && values.size(d) == queries.size(d);
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: expected queries (B, Q, {}), keys (B, K, {}), values (B, K, dv); got {}, {}, {}", who,
        same_d ? "d" : "dq", same_d ? "d" : "dk", shape_str(queries.shape()),
        shape_str(keys.shape()), shape_str(values.shape())));
}

Tensor AttentionScorer::attend(const Tensor& scores, const Tensor& values,
                               const AttentionMask& mask) {
  Tensor weights = masked_attention_softmax(scores, mask, name().c_str());  // (B, Q, K)
  weights_ = weights.detach();
  return matmul((*dropout_)(weights), values);  // (B, Q, dv)
}

// ----------------------------------------------------------------------------
// AdditiveAttention
//   score(q, k) = w_v . tanh(W_q q + W_k k)

AdditiveAttention::AdditiveAttention(int64_t query_size, int64_t key_size, int64_t num_hiddens,
                                     const AttentionScorerOptions& options)
    : AttentionScorer("AdditiveAttention", options.dropout) {
  const LinearOptions no_bias{.bias = false, .dtype = options.dtype};
  W_k_ = register_module("W_k", std::make_shared<Linear>(key_size, num_hiddens, no_bias));
  W_q_ = register_module("W_q", std::make_shared<Linear>(query_size, num_hiddens, no_bias));
  w_v_ = register_module("w_v", std::make_shared<Linear>(num_hiddens, 1, no_bias));
}

Tensor AdditiveAttention::scores(const Tensor& queries, const Tensor& keys) const {
  Tensor q = (*W_q_)(queries);                              // (B, Q, h)
  Tensor k = (*W_k_)(keys);                                 // (B, K, h)
  Tensor features = tanh(q.unsqueeze(2) + k.unsqueeze(1));  // (B, Q, K, h)
  return (*w_v_)(features).squeeze(-1);                     // (B, Q, K)
}

Tensor AdditiveAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                  const AttentionMask& mask) {
  check_inputs(queries, keys, values, /*same_d=*/false);
  if (queries.size(-1) != W_q_->in_features() || keys.size(-1) != W_k_->in_features())
    throw ShapeError(fmt::format(
        "AdditiveAttention: expected query size {} and key size {}, got queries {} and keys {}",
        W_q_->in_features(), W_k_->in_features(), shape_str(queries.shape()),
        shape_str(keys.shape())));
  return attend(scores(queries, keys), values, mask);
}

// ----------------------------------------------------------------------------
// DotProductAttention
//   score(q, k) = q . k / sqrt(d)    (q . k when unscaled)

DotProductAttention::DotProductAttention(double dropout, bool scaled)
    : AttentionScorer("DotProductAttention", dropout), scaled_(scaled) {}

Tensor DotProductAttention::scores(const Tensor& queries, const Tensor& keys) const {
  Tensor s = matmul(queries, keys.mT());  // (B, Q, K)
  if (!scaled_) return s;
  return mul(s, 1.0 / std::sqrt(static_cast<double>(queries.size(-1))));
}

Tensor DotProductAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                    const AttentionMask& mask) {
  check_inputs(queries, keys, values, /*same_d=*/true, /*batch_dims=*/true);
  return attend(scores(queries, keys), values, mask);
}

// ----------------------------------------------------------------------------
// ConcatLinearAttention and ConcatTanhSumAttention: scores of the concatenation [q; k]
//   Linear([q; k]) = W[:, :dq] q + (W[:, dq:] k + b): the two halves of the weight are applied
//   separately and broadcast over (Q, K), so the (B, Q, K, dq + dk) concatenation is never built.

ConcatLinearAttention::ConcatLinearAttention(int64_t query_size, int64_t key_size,
                                             const AttentionScorerOptions& options)
    : AttentionScorer("ConcatLinearAttention", options.dropout), query_size_(query_size) {
  linear_ = register_module(
      "linear",
      std::make_shared<Linear>(query_size + key_size, 1, LinearOptions{.dtype = options.dtype}));
}

Tensor ConcatLinearAttention::scores(const Tensor& queries, const Tensor& keys) const {
  const Tensor& w = linear_->weight();  // (1, dq + dk)
  const int64_t dk = w.size(1) - query_size_;
  Tensor sq = linear(queries, w.narrow(1, 0, query_size_));                 // (B, Q, 1)
  Tensor sk = linear(keys, w.narrow(1, query_size_, dk), linear_->bias());  // (B, K, 1)
  return sq + sk.mT();                                                      // (B, Q, K)
}

Tensor ConcatLinearAttention::forward(const Tensor& queries, const Tensor& keys,
                                      const Tensor& values, const AttentionMask& mask) {
  check_inputs(queries, keys, values, /*same_d=*/false);
  if (queries.size(-1) + keys.size(-1) != linear_->in_features() || queries.size(-1) != query_size_)
    throw ShapeError(fmt::format(
        "ConcatLinearAttention: expected query size {} and key size {}, got queries {} and keys {}",
        query_size_, linear_->in_features() - query_size_, shape_str(queries.shape()),
        shape_str(keys.shape())));
  return attend(scores(queries, keys), values, mask);
}

ConcatTanhSumAttention::ConcatTanhSumAttention(int64_t query_size, int64_t key_size,
                                               int64_t num_hiddens,
                                               const AttentionScorerOptions& options)
    : AttentionScorer("ConcatTanhSumAttention", options.dropout), query_size_(query_size) {
  linear_ =
      register_module("linear", std::make_shared<Linear>(query_size + key_size, num_hiddens,
                                                         LinearOptions{.dtype = options.dtype}));
}

Tensor ConcatTanhSumAttention::scores(const Tensor& queries, const Tensor& keys) const {
  const Tensor& w = linear_->weight();  // (h, dq + dk)
  const int64_t dk = w.size(1) - query_size_;
  Tensor pq = linear(queries, w.narrow(1, 0, query_size_));                 // (B, Q, h)
  Tensor pk = linear(keys, w.narrow(1, query_size_, dk), linear_->bias());  // (B, K, h)
  return sum(tanh(pq.unsqueeze(2) + pk.unsqueeze(1)), {-1});                // (B, Q, K)
}

Tensor ConcatTanhSumAttention::forward(const Tensor& queries, const Tensor& keys,
                                       const Tensor& values, const AttentionMask& mask) {
  check_inputs(queries, keys, values, /*same_d=*/false);
  if (queries.size(-1) + keys.size(-1) != linear_->in_features() || queries.size(-1) != query_size_)
    throw ShapeError(fmt::format(
        "ConcatTanhSumAttention: expected query size {} and key size {}, got queries {} and keys "
        "{}",
        query_size_, linear_->in_features() - query_size_, shape_str(queries.shape()),
        shape_str(keys.shape())));
  return attend(scores(queries, keys), values, mask);
}

// ----------------------------------------------------------------------------
// LocationBasedAttention (AttnDecoderRNN's attn and attn_combine)
//   weights = softmax(attn([Q[0]; K[0]]))              (N, value_size1)
//   applied = weights.unsqueeze(0) @ V                 (1, N, value_size2)
//   output  = attn_combine([Q[0]; applied[0]]).unsqueeze(0)   (1, N, output_size)

LocationBasedAttention::LocationBasedAttention(const LocationBasedAttentionOptions& o)
    : Module("LocationBasedAttention"),
      query_size_(o.query_size),
      key_size_(o.key_size),
      value_size1_(o.value_size1),
      value_size2_(o.value_size2) {
  if (std::min({o.query_size, o.key_size, o.value_size1, o.value_size2, o.output_size}) <= 0)
    throw ValueError(fmt::format(
        "LocationBasedAttention: every size must be set and > 0, got query_size {}, key_size {}, "
        "value_size1 {}, value_size2 {}, output_size {}",
        o.query_size, o.key_size, o.value_size1, o.value_size2, o.output_size));
  const LinearOptions lo{.dtype = o.dtype};
  attn_ = register_module("attn",
                          std::make_shared<Linear>(o.query_size + o.key_size, o.value_size1, lo));
  attn_combine_ = register_module(
      "attn_combine", std::make_shared<Linear>(o.query_size + o.value_size2, o.output_size, lo));
}

LocationBasedAttention::Result LocationBasedAttention::forward(const Tensor& Q, const Tensor& K,
                                                               const Tensor& V) const {
  // The tutorial's module reads Q[0], K[0] and multiplies by V with a batch of one; anything else
  // in dim 0 would be silently dropped there, so it is an error here.
  const bool ok = Q.dim() == 3 && K.dim() == 3 && V.dim() == 3 && Q.size(0) == 1 &&
                  K.size(0) == 1 && V.size(0) == 1 && Q.size(1) == K.size(1) &&
                  Q.size(2) == query_size_ && K.size(2) == key_size_ && V.size(1) == value_size1_ &&
                  V.size(2) == value_size2_;
  if (!ok)
    throw ShapeError(
        fmt::format("LocationBasedAttention: expected Q (1, N, {}), K (1, N, {}), V (1, {}, {}); "
                    "got {}, {}, {}",
                    query_size_, key_size_, value_size1_, value_size2_, shape_str(Q.shape()),
                    shape_str(K.shape()), shape_str(V.shape())));
  Tensor q0 = Q.select(0, 0), k0 = K.select(0, 0);                 // (N, q), (N, k)
  Tensor attn_weights = softmax((*attn_)(cat({q0, k0}, -1)), -1);  // (N, value_size1)
  Tensor attn_applied = matmul(attn_weights.unsqueeze(0), V);      // (1, N, value_size2)
  Tensor output = cat({q0, attn_applied.select(0, 0)}, -1);        // (N, q + value_size2)
  output = (*attn_combine_)(output).unsqueeze(0);                  // (1, N, output_size)
  return {output, attn_weights};
}

}  // namespace nabla::nn
