// What the batcher runs: a model adapter turns a batch of validated inputs into one prediction
// each. Adapters (langid_adapter.h, vit_adapter.h) own the model, pad the batch and apply the
// masks, so that each prediction equals (to float rounding) the one the input gets alone.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "nabla/nn/long_input.h"

namespace nabla::serve {

struct Input {
  std::vector<int64_t> tokens;  // langid: the text's byte tokens (any length)
  std::vector<float> pixels;    // vit: 28 x 28 values in [0, 1], row-major
  bool want_attention = false;
  // Filled by ModelAdapter::prepare on the HTTP thread, so that the one model thread only runs
  // the model (langid: the long-input windows and each window's tokens and n-gram ids).
  bool prepared = false;
  std::vector<nn::TokenWindow> windows;
  std::vector<std::vector<int64_t>> window_tokens, window_bigrams, window_trigrams;
};

// What the model thread did, summed since start (for /metrics): forward calls, rows (langid:
// windows), their real tokens and the tokens of the padded batches.
struct WorkCounts {
  int64_t forwards = 0, rows = 0, tokens = 0, padded_tokens = 0;
};

struct Prediction {
  int64_t label = 0;
  std::vector<double> probabilities;  // one per class, in labels() order
  int64_t windows = 1;                // how many windows of max_len tokens were read
  // With want_attention: the last layer's attention received by each input position (langid:
  // each byte; vit: each patch), averaged over heads and query positions, summing to 1.
  std::vector<double> attention;
};

class ModelAdapter {
 public:
  virtual ~ModelAdapter() = default;
  virtual const std::vector<std::string>& labels() const = 0;
  // The cost measure the batcher groups by (padded length), e.g. the token count.
  virtual int64_t length(const Input& input) const = 0;
  // Work that needs no model, done on the caller's (HTTP) thread before queueing; predict does
  // it itself for an input not prepared.
  virtual void prepare(Input& /*input*/) const {}
  // One prediction per input, in order. Runs on the batcher's thread only.
  virtual std::vector<Prediction> predict(const std::vector<const Input*>& batch) = 0;
  virtual std::string describe() const = 0;
  // Safe from any thread.
  WorkCounts work_counts() const {
    return {forwards_.load(), rows_.load(), tokens_.load(), padded_tokens_.load()};
  }

 protected:
  void count_forward(int64_t rows, int64_t tokens, int64_t padded_tokens) {
    ++forwards_, rows_ += rows, tokens_ += tokens, padded_tokens_ += padded_tokens;
  }

 private:
  std::atomic<int64_t> forwards_{0}, rows_{0}, tokens_{0}, padded_tokens_{0};
};

}  // namespace nabla::serve
