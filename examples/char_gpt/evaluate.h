// How char_gpt measures and uses its model: validation nats/char over strided windows, and text
// sampled through the model's KV cache (char_gpt::CachedGenerator), sliding the window when the
// text outgrows the context.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "examples/char_gpt/corpus.h"
#include "examples/char_gpt/model.h"

namespace char_gpt {

// The validation text scored as scored_windows (corpus.h) lays out.
class ValidationSet {
 public:
  // ids: the text's ids (without the '\n'); newline_id: the id of '\n'.
  ValidationSet(const std::vector<int64_t>& ids, int64_t newline_id, int64_t context);
  // Every window (the exact score), or about `count` of them evenly spaced (a cheaper estimate
  // for the evaluations during training; always the same windows).
  std::vector<ScoredWindow> windows(int64_t count = 0) const;
  // Mean negative log-likelihood in nats of the scored characters of `windows`, in batches.
  double nats_per_char(Model& model, const std::vector<ScoredWindow>& windows,
                       int64_t batch_size) const;
  int64_t characters() const { return static_cast<int64_t>(sequence_.size()) - 1; }

 private:
  std::vector<int64_t> sequence_;  // '\n' then the text
  int64_t context_;
  std::vector<ScoredWindow> all_;
};

struct SampleOptions {
  double temperature = 0.8, top_p = 0.95;
  uint64_t seed = 0;
};

// `prompt` followed by `count` sampled characters, batch 1. When prompt + new text would pass the
// context, the cache restarts from the last context / 2 characters.
std::string generate_text(Model& model, const Vocabulary& vocab, const std::string& prompt,
                          int64_t count, const SampleOptions& options);

}  // namespace char_gpt
