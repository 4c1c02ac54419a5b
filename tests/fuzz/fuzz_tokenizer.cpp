// libFuzzer target: the tokenizers (data/tokenizer.h) on arbitrary bytes, any encoding.
// ByteTokenizer: decode(encode(text)) == text, ids in the vocabulary, max_len respected.
// utf8_chars: the pieces concatenate back to the text, each a code point or one invalid byte.
// CharTokenizer built from the text's lines: each line round-trips through encode and decode
// (with min_count 1), rare characters become UNK (min_count 2), and decoding arbitrary ids (the
// input read as int64s: negative, huge) only skips what is not a character.
#include <algorithm>
#include <cstring>
#include <map>

#include "nabla/data/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

using namespace nabla;
using data::SpecialTokens;

namespace {

void check_bytes(const std::string& text, size_t max_len) {
  const data::ByteTokenizer tok;
  const std::vector<int64_t> ids = tok.encode(text);
  NABLA_FUZZ_CHECK(ids.size() == text.size(), "one id per byte");
  for (int64_t id : ids) NABLA_FUZZ_CHECK(id >= SpecialTokens::kCount && id < tok.vocab_size(), "");
  NABLA_FUZZ_CHECK(tok.decode(ids) == text, "byte round trip");
  const std::vector<int64_t> cut = tok.encode(text, max_len, true);
  NABLA_FUZZ_CHECK(cut.size() == std::min(text.size() + 1, max_len == 0 ? SIZE_MAX : max_len),
                   "max_len");
  NABLA_FUZZ_CHECK(cut.empty() || cut[0] == SpecialTokens::kCls, "CLS first");
}

void check_utf8(const std::string& text) {
  std::string joined;
  for (const std::string& ch : data::utf8_chars(text)) {
    NABLA_FUZZ_CHECK(!ch.empty() && ch.size() <= 4, "piece size");
    for (size_t k = 1; k < ch.size(); ++k)
      NABLA_FUZZ_CHECK((static_cast<unsigned char>(ch[k]) & 0xC0) == 0x80, "continuation byte");
    joined += ch;
  }
  NABLA_FUZZ_CHECK(joined == text, "utf8_chars lost bytes");
}

void check_chars(const std::string& text, const uint8_t* data, size_t size) {
  std::vector<std::string> lines;
  for (size_t begin = 0;;) {
    const size_t end = text.find('\n', begin);
    lines.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  const data::CharTokenizer all = data::CharTokenizer::build(lines);
  for (const std::string& line : lines) {
    const std::vector<int64_t> ids = all.encode(line, true, true);
    NABLA_FUZZ_CHECK(ids.front() == SpecialTokens::kBos && ids.back() == SpecialTokens::kEos, "");
    for (int64_t id : ids) NABLA_FUZZ_CHECK(id != SpecialTokens::kUnk, "UNK with min_count 1");
    NABLA_FUZZ_CHECK(all.decode(ids) == line, "char round trip");
  }
  std::map<std::string, size_t> counts;
  for (const std::string& line : lines)
    for (const std::string& ch : data::utf8_chars(line)) ++counts[ch];
  const data::CharTokenizer common = data::CharTokenizer::build(lines, 2);
  NABLA_FUZZ_CHECK(common.vocab_size() ==
                       SpecialTokens::kCount + static_cast<int64_t>(std::count_if(
                                                   counts.begin(), counts.end(),
                                                   [](const auto& c) { return c.second >= 2; })),
                   "vocabulary size with min_count 2");
  for (const std::string& line : lines) {
    const std::vector<std::string> chars = data::utf8_chars(line);
    const std::vector<int64_t> ids = common.encode(line);
    NABLA_FUZZ_CHECK(ids.size() == chars.size(), "one id per character");
    for (size_t i = 0; i < ids.size(); ++i)
      NABLA_FUZZ_CHECK((ids[i] == SpecialTokens::kUnk) == (counts[chars[i]] < 2), chars[i]);
  }
  std::vector<int64_t> arbitrary(size / sizeof(int64_t));
  if (!arbitrary.empty()) std::memcpy(arbitrary.data(), data, arbitrary.size() * sizeof(int64_t));
  (void)all.decode(arbitrary);
  (void)common.decode(arbitrary);
  (void)data::ByteTokenizer().decode(arbitrary);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return fuzz::guarded([&] {
    check_bytes(text, size == 0 ? 0 : data[0] % 16);
    check_utf8(text);
    check_chars(text, data, size);
  });
}
