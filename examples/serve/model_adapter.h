// What the batcher runs: a model adapter turns a batch of validated inputs into one prediction
// each. Adapters (langid_adapter.h, vit_adapter.h) own the model, pad the batch and apply the
// masks, so that each prediction equals (to float rounding) the one the input gets alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nabla::serve {

struct Input {
  std::vector<int64_t> tokens;  // langid: the text's byte tokens (any length)
  std::vector<float> pixels;    // vit: 28 x 28 values in [0, 1], row-major
  bool want_attention = false;
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
  // One prediction per input, in order. Runs on the batcher's thread only.
  virtual std::vector<Prediction> predict(const std::vector<const Input*>& batch) = 0;
  virtual std::string describe() const = 0;
};

}  // namespace nabla::serve
