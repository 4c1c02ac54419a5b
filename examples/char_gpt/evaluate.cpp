#include "examples/char_gpt/evaluate.h"

#include <algorithm>

#include "nabla/nabla.h"

namespace char_gpt {

using namespace nabla;

ValidationSet::ValidationSet(const std::vector<int64_t>& ids, int64_t newline_id, int64_t context)
    : context_(context) {
  sequence_.reserve(ids.size() + 1);
  sequence_.push_back(newline_id);
  sequence_.insert(sequence_.end(), ids.begin(), ids.end());
  all_ = scored_windows(static_cast<int64_t>(ids.size()), context);
}

std::vector<ScoredWindow> ValidationSet::windows(int64_t count) const {
  const auto n = static_cast<int64_t>(all_.size());
  if (count <= 0 || count >= n) return all_;
  std::vector<ScoredWindow> some;
  for (int64_t i = 0; i < count; ++i) some.push_back(all_[static_cast<size_t>(i * n / count)]);
  return some;
}

double ValidationSet::nats_per_char(Model& model, const std::vector<ScoredWindow>& windows,
                                    int64_t batch_size) const {
  NoGradGuard no_grad;
  model.eval();
  double nll = 0;
  int64_t scored = 0;
  for (size_t first = 0; first < windows.size(); first += static_cast<size_t>(batch_size)) {
    const size_t count = std::min(windows.size() - first, static_cast<size_t>(batch_size));
    std::vector<int64_t> tokens, targets;
    for (size_t w = first; w < first + count; ++w) {
      const auto begin = sequence_.begin() + windows[w].start;
      tokens.insert(tokens.end(), begin, begin + context_);
      targets.insert(targets.end(), begin + 1, begin + context_ + 1);
    }
    const auto rows = static_cast<int64_t>(count);
    const Tensor logits = model.forward(from_vector(tokens, {rows, context_}));
    const std::vector<double> losses =
        cross_entropy(logits.reshape({rows * context_, logits.size(2)}),
                      from_vector(targets, {rows * context_}), {.reduction = Reduction::None})
            .to(kFloat64)
            .to_vector<double>();
    for (size_t w = 0; w < count; ++w)
      for (int64_t j = windows[first + w].first_score; j < context_; ++j, ++scored)
        nll += losses[w * static_cast<size_t>(context_) + static_cast<size_t>(j)];
  }
  model.train();
  return nll / static_cast<double>(scored);
}

std::string generate_text(Model& model, const Vocabulary& vocab, const std::string& prompt,
                          int64_t count, const SampleOptions& options) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t context = model.config().context;
  std::vector<int64_t> ids = vocab.encode(prompt.empty() ? "\n" : prompt, "--prompt");
  CachedGenerator next_token(model);
  Generator gen(options.seed);
  const nn::SamplingOptions sampling{.temperature = options.temperature, .top_p = options.top_p};
  for (int64_t left = count; left > 0;) {
    // The model sees the last context / 2 ids when the whole text no longer fits with room to go.
    const auto keep = static_cast<int64_t>(ids.size()) < context
                          ? static_cast<int64_t>(ids.size())
                          : std::max<int64_t>(1, context / 2);
    const int64_t steps = std::min(left, context - keep);
    const std::vector<int64_t> window(ids.end() - keep, ids.end());
    const std::vector<int64_t> out =
        nn::sample(next_token, from_vector(window, {1, keep}), steps, sampling, gen)
            .to_vector<int64_t>();
    ids.insert(ids.end(), out.begin() + keep, out.end());
    left -= steps;
  }
  model.train();
  const std::string text = vocab.decode(ids);
  return prompt.empty() ? text.substr(1) : text;  // without the stand-in '\n' of an empty prompt
}

}  // namespace char_gpt
