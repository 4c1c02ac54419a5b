// transformer_langid's classifier behind the server: the example's own model
// (examples/transformer_langid/langid_model.h), its config read from a checkpoint, and batched
// prediction with the long-input rule (nn/long_input.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "examples/serve/model_adapter.h"
#include "nabla/nn/long_input.h"
#include "nabla/nn/module.h"
#include "nabla/nn/transformer.h"

namespace nabla::examples {
class LangIdModel;
}

namespace nabla::serve {

struct LangIdConfig {
  int64_t vocab = 262, d_model = 64, heads = 4, layers = 2, ffn = 256, max_len = 128;
  int64_t ngram_buckets = 8192, classes = 8;
  std::vector<std::string> languages;
};

// Reads the model section of `checkpoint` (a transformer_langid checkpoint.safetensors): the
// widths, layer count, buckets and classes from the tensors' shapes; heads, max_len and the
// language names from model.json beside it (written by transformer_langid), else `fallback`'s.
// FormatError naming the file when a tensor is missing or the shapes disagree.
LangIdConfig read_langid_config(const std::string& checkpoint, const LangIdConfig& fallback);

class LangIdAdapter : public ModelAdapter {
 public:
  LangIdAdapter(const std::string& checkpoint, const LangIdConfig& fallback,
                nn::LongInputOptions long_input);
  // A randomly initialised model of config `c` (tests: no checkpoint needed).
  LangIdAdapter(const LangIdConfig& c, nn::LongInputOptions long_input, uint64_t seed);
  ~LangIdAdapter() override;
  const std::vector<std::string>& labels() const override { return config_.languages; }
  int64_t length(const Input& input) const override;
  // The windows, their tokens and n-gram ids (on the HTTP thread).
  void prepare(Input& input) const override;
  // The batch's windows sorted by length and run as groups of similar length (less padding:
  // a group grows while its padded tokens stay within kMaxPadding of its real ones, and always
  // up to kMinGroupTokens real tokens, so that the products stay large).
  std::vector<Prediction> predict(const std::vector<const Input*>& batch) override;
  static constexpr double kMaxPadding = 1.25;
  static constexpr int64_t kMinGroupTokens = 256;
  std::string describe() const override;
  const LangIdConfig& config() const { return config_; }

 private:
  LangIdConfig config_;
  nn::LongInputOptions long_input_;
  std::unique_ptr<examples::LangIdModel> model_;
};

}  // namespace nabla::serve
