// Inputs longer than a sequence classifier's maximum length (max_len tokens): either truncated
// to their first max_len tokens, or split into overlapping windows of max_len tokens whose
// predictions are combined. The windows start every `stride` tokens and the last one is aligned
// to the end of the input, so every token is inside at least one window.
//
// Combination rule (windows mode): the windows' log-probabilities averaged with weights equal to
// each window's token count, renormalised with log_softmax:
//   log p(c) = log_softmax_c( sum_w n_w * log_softmax(z_w)_c / sum_w n_w )
// i.e. a weighted geometric mean of the windows' distributions (a product of experts, Hinton
// 2002). A class that most of the text's windows favour wins; a short final window counts less.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::nn {

enum class LongInputMode { Truncate, Windows };

// "truncate" or "windows"; ValueError naming the flag otherwise.
LongInputMode parse_long_input_mode(const std::string& name);
const char* long_input_mode_name(LongInputMode mode);

struct LongInputOptions {
  LongInputMode mode = LongInputMode::Windows;
  size_t max_len = 128;  // the model's maximum length: the window length
  size_t stride = 0;     // windows start every `stride` tokens; 0: max_len / 2 (half overlap)
};

// A window [begin, end) of token positions.
struct TokenWindow {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// The windows an input of `length` tokens is read in: one window [0, min(length, max_len)) when
// truncating or when the input fits, else overlapping windows covering every token. ValueError
// for max_len 0, a stride of 0 after defaulting or a stride above max_len (gaps).
std::vector<TokenWindow> long_input_windows(size_t length, const LongInputOptions& options);

// Combines per-window logits (W, C) by the rule above; `window_tokens` holds each window's token
// count (W values, each > 0). Returns (C,) log-probabilities.
Tensor combine_window_logits(const Tensor& logits, const std::vector<size_t>& window_tokens);

// Classifies one token sequence of any length: cuts it into windows, calls `classify` once with
// all windows' tokens (it returns (W, C) logits, row w for window w) and combines them.
// Returns (C,) log-probabilities; with one window, log_softmax of its logits.
using WindowClassifier = std::function<Tensor(const std::vector<std::vector<int64_t>>& windows)>;
Tensor classify_long_input(const std::vector<int64_t>& tokens, const LongInputOptions& options,
                           const WindowClassifier& classify);

}  // namespace nabla::nn
