#include "examples/char_gpt/corpus.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "nabla/core/error.h"

namespace char_gpt {

using nabla::Error;

namespace {

// "Ge1:1 In the beginning" -> book "Ge", chapter "1", text "In the beginning".
struct Verse {
  std::string_view book, chapter, text;
};

bool parse_verse(std::string_view line, Verse& v) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return false;
  const std::string_view ref = line.substr(0, space);
  const size_t colon = ref.find(':');
  if (colon == std::string_view::npos || colon + 1 == ref.size()) return false;
  size_t digits = colon;
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(ref[digits - 1]))) --digits;
  if (digits == 0 || digits == colon) return false;
  v = {ref.substr(0, digits), ref.substr(digits, colon - digits), line.substr(space + 1)};
  return true;
}

}  // namespace

Corpus split_bible_listing(std::string_view listing) {
  Corpus c;
  std::string_view book, chapter;  // of the previous verse: a change starts a new chapter
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < listing.size()) {
    size_t end = listing.find('\n', pos);
    if (end == std::string_view::npos) end = listing.size();
    const std::string_view line = listing.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    Verse v;
    if (!parse_verse(line, v))
      throw nabla::FormatError(fmt::format(
          "char_gpt: line {} of the bible listing is not \"<Book><chapter>:<verse> <text>\": "
          "\"{}\"",
          line_no, line.substr(0, 60)));
    if (v.book != book || v.chapter != chapter) {
      ++c.chapters;
      book = v.book;
      chapter = v.chapter;
      if (c.chapters % kValidationEvery == 0) ++c.validation_chapters;
    }
    std::string& split = c.chapters % kValidationEvery == 0 ? c.validation : c.train;
    split.append(v.text);
    split.push_back('\n');
  }
  return c;
}

Corpus load_kjv(const std::string& program) {
  const std::string command = program + " -f -l 100000 \"Gen1:1-Rev22:21\" 2>/dev/null";
  std::string listing;
  int status = -1;
  {
    FILE* raw = popen(command.c_str(), "r");
    if (raw == nullptr) throw Error("char_gpt: cannot start '" + program + "'");
    char buf[1 << 16];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, raw)) > 0) listing.append(buf, n);
    status = pclose(raw);
  }
  // The shell exits with 127 when it cannot find the program.
  if (listing.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format(
        "char_gpt: '{}' did not print the King James Bible (exit status {}); install Debian's "
        "bible-kjv package: scripts/setup.sh (or sudo apt-get install bible-kjv)",
        command, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  return split_bible_listing(listing);
}

std::vector<ScoredWindow> scored_windows(int64_t characters, int64_t context) {
  if (context < 1 || characters < context)
    throw nabla::ValueError(fmt::format(
        "char_gpt: cannot score {} characters with windows of {} (the text must be at least as "
        "long as the context)",
        characters, context));
  const int64_t stride = std::max<int64_t>(1, context / 2);
  const int64_t last_start = characters - context;  // its last target is the text's last char
  std::vector<ScoredWindow> windows;
  int64_t scored_until = 1;  // the next target (index in the '\n'-prefixed sequence) to score
  for (int64_t start = 0;; start += stride) {
    start = std::min(start, last_start);
    windows.push_back({start, scored_until - start - 1});
    scored_until = start + context + 1;
    if (start == last_start) return windows;
  }
}

Vocabulary::Vocabulary(std::string_view text) {
  std::array<bool, 256> seen{};
  for (const char ch : text) seen[static_cast<unsigned char>(ch)] = true;
  id_of_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (!seen[static_cast<size_t>(b)]) continue;
    id_of_[static_cast<size_t>(b)] = static_cast<int16_t>(chars_.size());
    chars_.push_back(static_cast<char>(b));
  }
}

std::vector<int64_t> Vocabulary::encode(std::string_view text, std::string_view what) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const int16_t id = id_of_[byte];
    if (id < 0)
      throw nabla::ValueError(fmt::format(
          "char_gpt: {} has byte 0x{:02x}{} at offset {}, which is not among the {} characters "
          "of the training text",
          what, byte, std::isprint(byte) ? fmt::format(" ('{}')", static_cast<char>(byte)) : "", i,
          chars_.size()));
    ids[i] = id;
  }
  return ids;
}

nabla::Tensor Vocabulary::encode_tensor(std::string_view text, std::string_view what) const {
  const std::vector<int64_t> ids = encode(text, what);
  return nabla::from_vector(ids, {static_cast<int64_t>(ids.size())});
}

std::string Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (const int64_t id : ids) {
    if (id < 0 || id >= size())
      throw nabla::IndexError(
          fmt::format("char_gpt: token id {} outside the vocabulary of {}", id, size()));
    out.push_back(chars_[static_cast<size_t>(id)]);
  }
  return out;
}

}  // namespace char_gpt
