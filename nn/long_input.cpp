#include "nabla/nn/long_input.h"

#include <fmt/format.h>

#include "nabla/core/error.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/softmax.h"

namespace nabla::nn {

LongInputMode parse_long_input_mode(const std::string& name) {
  if (name == "truncate") return LongInputMode::Truncate;
  if (name == "windows") return LongInputMode::Windows;
  throw ValueError(fmt::format("--long-input: '{}' is not one of: truncate, windows", name));
}

const char* long_input_mode_name(LongInputMode mode) {
  return mode == LongInputMode::Truncate ? "truncate" : "windows";
}

std::vector<TokenWindow> long_input_windows(size_t length, const LongInputOptions& o) {
  if (o.max_len == 0) throw ValueError("long_input_windows: max_len must be positive");
  const size_t stride = o.stride == 0 ? o.max_len / 2 : o.stride;
  if (stride == 0 || stride > o.max_len)
    throw ValueError(fmt::format(
        "long_input_windows: stride {} must be in [1, max_len {}] (a larger stride skips tokens)",
        stride, o.max_len));
  if (length <= o.max_len || o.mode == LongInputMode::Truncate)
    return {TokenWindow{0, std::min(length, o.max_len)}};
  std::vector<TokenWindow> windows;
  for (size_t begin = 0;; begin += stride) {
    if (begin + o.max_len >= length) {  // the last window ends at the input's end
      windows.push_back({length - o.max_len, length});
      break;
    }
    windows.push_back({begin, begin + o.max_len});
  }
  return windows;
}

Tensor combine_window_logits(const Tensor& logits, const std::vector<size_t>& window_tokens) {
  if (logits.dim() != 2 || logits.size(0) != static_cast<int64_t>(window_tokens.size()) ||
      logits.size(0) == 0)
    throw ShapeError(fmt::format(
        "combine_window_logits: logits of shape {} for {} windows (want (windows, classes), "
        "at least one window)",
        shape_str(logits.shape()), window_tokens.size()));
  std::vector<double> weights;
  double total = 0;
  for (size_t n : window_tokens) {
    if (n == 0) throw ValueError("combine_window_logits: a window with 0 tokens");
    weights.push_back(static_cast<double>(n));
    total += static_cast<double>(n);
  }
  for (double& w : weights) w /= total;
  const Tensor w = from_vector(weights, {logits.size(0), 1}).to(logits.dtype());
  return log_softmax(sum(mul(log_softmax(logits, 1), w), {0}), 0);
}

Tensor classify_long_input(const std::vector<int64_t>& tokens, const LongInputOptions& options,
                           const WindowClassifier& classify) {
  if (tokens.empty()) throw ValueError("classify_long_input: an empty token sequence");
  const std::vector<TokenWindow> windows = long_input_windows(tokens.size(), options);
  std::vector<std::vector<int64_t>> pieces;
  std::vector<size_t> counts;
  for (const TokenWindow& w : windows) {
    const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(w.begin);
    pieces.emplace_back(first, first + static_cast<std::ptrdiff_t>(w.size()));
    counts.push_back(w.size());
  }
  return combine_window_logits(classify(pieces), counts);
}

}  // namespace nabla::nn
