// Tokenizers with PyTorch-style special tokens: PAD, CLS, MASK, BOS, EOS (and UNK for chars).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace nabla::data {

struct SpecialTokens {
  static constexpr int64_t kPad = 0, kCls = 1, kMask = 2, kBos = 3, kEos = 4, kUnk = 5;
  static constexpr int64_t kCount = 6;
};

// Byte-level: every byte b is token kCount + b, so any text (any encoding) is representable.
class ByteTokenizer {
 public:
  int64_t vocab_size() const { return SpecialTokens::kCount + 256; }
  // Prepends CLS if add_cls; truncates to max_len tokens (0 = no limit).
  std::vector<int64_t> encode(const std::string& text, size_t max_len = 0,
                              bool add_cls = false) const;
  std::string decode(const std::vector<int64_t>& ids) const;  // skips special tokens
};

// Character-level over UTF-8 code points, vocabulary built from a corpus (most frequent first,
// ties by code point, so the same corpus always gives the same ids).
class CharTokenizer {
 public:
  CharTokenizer() = default;
  static CharTokenizer build(const std::vector<std::string>& corpus, size_t min_count = 1);
  int64_t vocab_size() const { return SpecialTokens::kCount + static_cast<int64_t>(chars_.size()); }
  std::vector<int64_t> encode(const std::string& text, bool add_bos = false,
                              bool add_eos = false) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  const std::vector<std::string>& chars() const { return chars_; }

 private:
  std::vector<std::string> chars_;
  std::unordered_map<std::string, int64_t> ids_;
};

// Splits UTF-8 text into code points (an invalid byte becomes its own 1-byte piece).
std::vector<std::string> utf8_chars(const std::string& text);

}  // namespace nabla::data
