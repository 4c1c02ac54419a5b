#include "nabla/data/tokenizer.h"

#include <algorithm>
#include <map>

namespace nabla::data {

std::vector<int64_t> ByteTokenizer::encode(const std::string& text, size_t max_len,
                                           bool add_cls) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() + 1);
  if (add_cls) ids.push_back(SpecialTokens::kCls);
  for (unsigned char c : text) ids.push_back(SpecialTokens::kCount + c);
  if (max_len > 0 && ids.size() > max_len) ids.resize(max_len);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids)
    if (id >= SpecialTokens::kCount && id < vocab_size())
      out += static_cast<char>(id - SpecialTokens::kCount);
  return out;
}

std::vector<std::string> utf8_chars(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 1;
    if (i + len > text.size()) len = 1;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) len = 1;
    out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

CharTokenizer CharTokenizer::build(const std::vector<std::string>& corpus, size_t min_count) {
  std::map<std::string, size_t> counts;
  for (const std::string& s : corpus)
    for (const std::string& ch : utf8_chars(s)) ++counts[ch];
  std::vector<std::pair<std::string, size_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  CharTokenizer tok;
  for (const auto& [ch, n] : sorted) {
    if (n < min_count) break;
    tok.ids_[ch] = SpecialTokens::kCount + static_cast<int64_t>(tok.chars_.size());
    tok.chars_.push_back(ch);
  }
  return tok;
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text, bool add_bos,
                                           bool add_eos) const {
  std::vector<int64_t> ids;
  if (add_bos) ids.push_back(SpecialTokens::kBos);
  for (const std::string& ch : utf8_chars(text)) {
    auto it = ids_.find(ch);
    ids.push_back(it == ids_.end() ? SpecialTokens::kUnk : it->second);
  }
  if (add_eos) ids.push_back(SpecialTokens::kEos);
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id == SpecialTokens::kEos) break;
    if (id >= SpecialTokens::kCount && id < vocab_size())
      out += chars_[static_cast<size_t>(id - SpecialTokens::kCount)];
  }
  return out;
}

}  // namespace nabla::data
