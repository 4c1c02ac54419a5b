// libFuzzer target: the fortune-cookie reader (data::parse_fortunes, and read_fortune_file on
// the same bytes through a path). Invariants of what it promises (data/text.h): entries are
// non-empty, hold no control characters (ANSI escapes stripped, whitespace collapsed to single
// spaces, none at either end), there are no more entries than "%" separators plus one, and the
// file reader gives the same entries as the in-memory parser.
#include "nabla/data/text.h"
#include "tests/fuzz/fuzz_common.h"

using namespace nabla;

namespace {

void check(const uint8_t* data, size_t size) {
  static fuzz::MemFile file;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> entries = data::parse_fortunes(text);
  size_t separators = 0;
  for (size_t at = 0; (at = text.find('%', at)) != std::string::npos; ++at) ++separators;
  NABLA_FUZZ_CHECK(entries.size() <= separators + 1, "more entries than separators");
  for (const std::string& e : entries) {
    NABLA_FUZZ_CHECK(!e.empty(), "an empty entry");
    NABLA_FUZZ_CHECK(e.front() != ' ' && e.back() != ' ', "space at an end: " + e);
    NABLA_FUZZ_CHECK(e.find("  ") == std::string::npos, "two spaces: " + e);
    for (char c : e)
      NABLA_FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20, "a control character: " + e);
    NABLA_FUZZ_CHECK(data::utf8_length(e) <= e.size(), e);
  }
  NABLA_FUZZ_CHECK(data::read_fortune_file(file.write(data, size)) == entries,
                   "the file reader and the parser disagree");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded([&] { check(data, size); });
}
