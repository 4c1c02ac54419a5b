// The language-identification corpus of the main example: fortune cookies in 8 languages from
// Debian's fortunes packages. Entries of 20-300 characters, de-duplicated (a text found in two
// languages is dropped), at most `max_per_language` per language chosen by a hash of the text,
// and split into train/test by another hash of the text, so the split never depends on file
// order or on the machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nabla::data {

struct LanguageSource {
  std::string code;                   // "en", "de", ...
  std::vector<std::string> packages;  // Debian packages holding its fortune files
};
const std::vector<LanguageSource>& fortune_languages();

struct TextExample {
  std::string text;
  int64_t label;
};

struct LangIdCorpus {
  std::vector<std::string> languages;
  std::vector<TextExample> train, test;
};

struct LangIdOptions {
  size_t min_chars = 20, max_chars = 300;
  size_t max_per_language = 2400;
  int test_percent = 10;
  std::string dpkg_info_dir = "/var/lib/dpkg/info";
};

LangIdCorpus load_fortune_langid(const LangIdOptions& opts = {});

uint64_t fnv1a64(const std::string& s, uint64_t seed = 0);

}  // namespace nabla::data
