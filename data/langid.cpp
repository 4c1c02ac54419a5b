#include "nabla/data/langid.h"

#include <algorithm>
#include <map>
#include <set>

#include "nabla/data/text.h"

namespace nabla::data {

const std::vector<LanguageSource>& fortune_languages() {
  static const std::vector<LanguageSource> langs = {
      {"en", {"fortunes", "fortunes-min"}},
      {"de", {"fortunes-de"}},
      {"es", {"fortunes-es"}},
      {"it", {"fortunes-it"}},
      {"pt", {"fortunes-br"}},
      {"cs", {"fortunes-cs"}},
      {"pl", {"fortunes-pl"}},
      {"ru", {"fortunes-ru"}},
  };
  return langs;
}

uint64_t fnv1a64(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

LangIdCorpus load_fortune_langid(const LangIdOptions& opts) {
  const auto& langs = fortune_languages();
  std::vector<std::set<std::string>> per_lang(langs.size());
  std::map<std::string, int> owners;  // text -> number of languages it appears in
  for (size_t l = 0; l < langs.size(); ++l) {
    for (const std::string& pkg : langs[l].packages)
      for (const std::string& file : package_fortune_files(pkg, opts.dpkg_info_dir))
        for (std::string& e : read_fortune_file(file)) {
          const size_t n = utf8_length(e);
          if (n < opts.min_chars || n > opts.max_chars) continue;
          if (per_lang[l].insert(e).second) ++owners[e];
        }
  }
  LangIdCorpus corpus;
  for (size_t l = 0; l < langs.size(); ++l) {
    corpus.languages.push_back(langs[l].code);
    std::vector<std::string> texts;
    for (const std::string& t : per_lang[l])
      if (owners[t] == 1) texts.push_back(t);
    // Deterministic subset: the texts with the smallest hashes.
    std::sort(texts.begin(), texts.end(), [](const std::string& a, const std::string& b) {
      uint64_t ha = fnv1a64(a, 1), hb = fnv1a64(b, 1);
      return ha != hb ? ha < hb : a < b;
    });
    if (texts.size() > opts.max_per_language) texts.resize(opts.max_per_language);
    for (std::string& t : texts) {
      const bool test = fnv1a64(t, 2) % 100 < static_cast<uint64_t>(opts.test_percent);
      (test ? corpus.test : corpus.train).push_back({std::move(t), static_cast<int64_t>(l)});
    }
  }
  return corpus;
}

}  // namespace nabla::data
