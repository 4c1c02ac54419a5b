// Decoding strategies for any model that gives next-token logits: greedy, sampling (temperature,
// top-k, top-p) and beam search. A model takes part by implementing NextToken; one with a KV
// cache keeps the cache inside and is fed only the new tokens. docs/generation.md describes the
// contract and the algorithms. Every decoder runs under NoGradGuard.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "nabla/core/generator.h"
#include "nabla/core/tensor.h"
#include "nabla/nn/kv_cache.h"

namespace nabla::nn {

// What a model provides to the decoders. A decoder calls reset(), then logits(prompt), then
// logits(one new token per row) once per step; between two calls beam search may call reorder.
struct NextToken {
  virtual ~NextToken() = default;
  // Tokens are ids in [0, vocab_size()); logits have vocab_size() columns.
  virtual int64_t vocab_size() const = 0;
  // new_tokens (B, n) int64: the tokens that follow, row by row, those of the earlier calls
  // since reset() (the prompt first, then n = 1). Returns (B, V) logits for the next position.
  virtual Tensor logits(const Tensor& new_tokens) = 0;
  // Beam search: the model's rows become its old rows batch_index (int64 (B'), entries in
  // [0, B)); B' may differ from B (each prompt row becomes `width` beams). The default throws:
  // a model with state (cache or history) must implement it; a stateless one overrides it empty.
  virtual void reorder(const Tensor& batch_index);
  // Forget every token seen (empty the cache).
  virtual void reset() {}
};

// A NextToken for a model without a cache: it keeps the token history and runs
// forward(all tokens so far) at every step, O(t^2) in total. forward maps (B, t) int64 to
// (B, t, V) logits (as a causal language model does) or to (B, V) for the last position.
class RecomputeNextToken final : public NextToken {
 public:
  RecomputeNextToken(std::function<Tensor(const Tensor&)> forward, int64_t vocab_size);
  int64_t vocab_size() const override { return vocab_size_; }
  Tensor logits(const Tensor& new_tokens) override;
  void reorder(const Tensor& batch_index) override;
  void reset() override { history_ = Tensor(); }
  const Tensor& history() const { return history_; }  // (B, t) int64; undefined after reset

 private:
  std::function<Tensor(const Tensor&)> forward_;
  int64_t vocab_size_;
  Tensor history_;
};

// A NextToken for a model with a Transformer KV cache (nn/kv_cache.h): it owns the cache (at
// most max_len positions) and calls step(new tokens (B, n), cache), which runs the model on the
// new positions only, appending to the cache, and returns their logits (B, n, V) or the last
// one's (B, V). reorder and reset act on the cache. Feeding past max_len positions is a
// ValueError naming `name` and the counts, before the model runs.
class CachedNextToken final : public NextToken {
 public:
  using Step = std::function<Tensor(const Tensor&, TransformerCache&)>;
  CachedNextToken(Step step, int64_t vocab_size, int64_t max_len,
                  std::string name = "CachedNextToken");
  int64_t vocab_size() const override { return vocab_size_; }
  Tensor logits(const Tensor& new_tokens) override;
  void reorder(const Tensor& batch_index) override { cache_.reorder(batch_index); }
  void reset() override { cache_.reset(); }
  const TransformerCache& cache() const { return cache_; }

 private:
  Step step_;
  int64_t vocab_size_;
  std::string name_;
  TransformerCache cache_;
};

// Prompts are (B, T) int64 with T >= 1 (or (T), giving results without the batch dim), every
// id in [0, vocab_size()). The returned sequences are the prompt followed by the new tokens.
// With an end token a row stops at its first end token (included); rows that stopped are padded
// with the end token until every row has stopped or max_new tokens were added.

// Each new token is the argmax of the logits (the first on ties).
Tensor greedy(NextToken& model, const Tensor& prompt, int64_t max_new,
              std::optional<int64_t> end_token = std::nullopt);

struct SamplingOptions {
  double temperature = 1.0;  // > 0; the logits are divided by it first
  int64_t top_k = 0;         // 0: off; else keep the k most likely tokens (top_k_filter)
  double top_p = 1.0;        // in (0, 1]; 1: off; else nucleus filtering (top_p_filter)
  std::optional<int64_t> end_token = std::nullopt;
};

// Each new token is drawn from softmax(filtered logits) with multinomial from gen; the filters
// run in transformers' order: temperature, top-k, top-p. The same gen state gives the same text.
Tensor sample(NextToken& model, const Tensor& prompt, int64_t max_new,
              const SamplingOptions& options, Generator& gen);

struct BeamOptions {
  int64_t width = 4;            // >= 1: beams kept per prompt row
  int64_t max_new = 32;         // >= 0: new tokens at most
  double length_penalty = 1.0;  // a finished sequence scores sum(log p) / new_tokens^penalty
  std::optional<int64_t> end_token = std::nullopt;
  int64_t num_return = 1;  // in [1, width]: best sequences returned per prompt row
};

struct BeamResult {
  Tensor sequences;  // (B, num_return, L) int64: prompt + new tokens (best first), padded after
                     // a shorter sequence's end with the end token (0 without one)
  Tensor lengths;    // (B, num_return) int64: each sequence's length before the padding
  Tensor scores;     // (B, num_return) float64: sum of the new tokens' log-probabilities
                     // divided by (number of new tokens, end token included)^length_penalty
};

// Beam search as transformers' BeamSearchScorer (early_stopping = false): each step extends
// every beam by every token, ranks the 2 * width best extensions by total log-probability, turns
// an end token among the first width into a finished sequence, and keeps the first width others
// as the new beams. A row stops when it has width finished sequences and the step's best
// extension, finished or not (sum / new tokens^penalty), is no better than the worst of them; at
// max_new the beams left count as finished. For a 1-D prompt the results have no batch dim.
BeamResult beam_search(NextToken& model, const Tensor& prompt, const BeamOptions& options);

}  // namespace nabla::nn
