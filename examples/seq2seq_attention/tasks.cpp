#include "examples/seq2seq_attention/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "nabla/core/generator.h"
#include "nabla/data/langid.h"
#include "nabla/data/tokenizer.h"

namespace nabla::examples::seq2seq {

using data::SpecialTokens;

namespace {

// ---- dates --------------------------------------------------------------------------------
constexpr std::array<const char*, 12> kMonths = {"january",   "february", "march",    "april",
                                                 "may",       "june",     "july",     "august",
                                                 "september", "october",  "november", "december"};
constexpr std::array<const char*, 7> kDays = {"sunday",   "monday", "tuesday", "wednesday",
                                              "thursday", "friday", "saturday"};

int days_in_month(int y, int m) {
  static constexpr std::array<int, 12> d = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : d[static_cast<size_t>(m - 1)];
}

int day_of_week(int y, int m, int d) {  // Sakamoto; 0 = sunday
  static constexpr std::array<int, 12> t = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  if (m < 3) y -= 1;
  return (y + y / 4 - y / 100 + y / 400 + t[static_cast<size_t>(m - 1)] + d) % 7;
}

// A human-readable date in one of seven formats and its ISO form; years 1950..2049 so that a
// two-digit year is unambiguous (50..99 -> 19xx, 00..49 -> 20xx).
Pair random_date(Generator& gen) {
  auto draw = [&](uint64_t n) { return static_cast<int>(gen.bits64(gen.advance(1)) % n); };
  const int y = 1950 + draw(100), m = 1 + draw(12),
            d = 1 + draw(static_cast<uint64_t>(days_in_month(y, m)));
  const std::string month = kMonths[static_cast<size_t>(m - 1)];
  const std::string day = kDays[static_cast<size_t>(day_of_week(y, m, d))];
  std::string src;
  switch (draw(7)) {
    case 0:
      src = fmt::format("{}, {} {} {}", day, month, d, y);
      break;
    case 1:
      src = fmt::format("{}/{}/{:02d}", d, m, y % 100);
      break;
    case 2:
      src = fmt::format("{} {}, {}", month, d, y);
      break;
    case 3:
      src = fmt::format("{} {} {}", d, month.substr(0, 3), y);
      break;
    case 4:
      src = fmt::format("{:02d}.{:02d}.{}", d, m, y);
      break;
    case 5:
      src = fmt::format("{} {} {}", day.substr(0, 3), month.substr(0, 3), d) +
            fmt::format(" '{:02d}", y % 100);
      break;
    default:
      src = fmt::format("the {} of {} {}", d, month, y);
      break;
  }
  return {src, data::utf8_chars(fmt::format("{:04d}-{:02d}-{:02d}", y, m, d))};
}

}  // namespace

Dataset make_dates(int64_t n_train, int64_t n_test, uint64_t seed) {
  Generator gen(seed);
  Dataset ds;
  std::set<std::string> seen;
  while (static_cast<int64_t>(ds.train.size()) < n_train ||
         static_cast<int64_t>(ds.test.size()) < n_test) {
    Pair p = random_date(gen);
    if (!seen.insert(p.src).second) continue;
    auto& split = data::fnv1a64(p.src) % 10 == 0 ? ds.test : ds.train;
    const int64_t want = &split == &ds.test ? n_test : n_train;
    if (static_cast<int64_t>(split.size()) < want) split.push_back(std::move(p));
  }
  return ds;
}

// ---- g2p ----------------------------------------------------------------------------------
std::string default_cmu_dir() {
  const std::string installed = "/usr/share/festival/dicts/cmu";
  if (std::filesystem::exists(installed + "/cmudict-0.4.out")) return installed;
  std::string base;
  if (const char* d = std::getenv("NABLA_DATA_DIR")) {
    base = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME")) {
    base = std::string(x) + "/nabla";
  } else if (const char* h = std::getenv("HOME")) {
    base = std::string(h) + "/.cache/nabla";
  }
  return base + "/festlex-cmu" + installed;
}

// cmudict-0.4.out lines: ("abbreviate" nil (((ax) 0) ((b r iy) 1) ((v iy) 0) ((ey t) 1)))
Dataset load_cmu(const std::string& dir, int64_t n_train, int64_t n_test) {
  const std::string path = dir + "/cmudict-0.4.out";
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(fmt::format(
        "seq2seq_attention: {} not found. Unpack the CMU dictionary from Debian's festlex-cmu "
        "with scripts/get-cmudict.sh (or `apt-get download festlex-cmu && dpkg -x "
        "festlex-cmu_*.deb <dir>` and pass --cmu-dir <dir>/usr/share/festival/dicts/cmu)",
        path));
  Dataset ds;
  std::set<std::string> seen;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("(\"", 0) != 0) continue;
    const size_t close = line.find('"', 2);
    if (close == std::string::npos) continue;
    const std::string word = line.substr(2, close - 2);
    if (word.empty() || word.size() > 20) continue;
    if (!std::all_of(word.begin(), word.end(),
                     [](char ch) { return (ch >= 'a' && ch <= 'z') || ch == '\''; }))
      continue;
    if (!seen.insert(word).second) continue;  // homographs: keep the first pronunciation
    std::string rest = line.substr(close + 1);
    std::replace(rest.begin(), rest.end(), '(', ' ');
    std::replace(rest.begin(), rest.end(), ')', ' ');
    std::istringstream ss(rest);
    std::string tok;
    ss >> tok;  // the part of speech (nil, n, v, ...)
    std::vector<std::string> phones;
    while (ss >> tok)
      if (!std::isdigit(static_cast<unsigned char>(tok[0]))) phones.push_back(tok);
    if (phones.empty()) continue;
    auto& split = data::fnv1a64(word) % 10 == 0 ? ds.test : ds.train;
    split.push_back({word, std::move(phones)});
  }
  if (ds.train.empty()) throw std::runtime_error("seq2seq_attention: no entries in " + path);
  auto thin = [](std::vector<Pair>& v, int64_t keep) {  // an evenly spaced subset
    if (keep <= 0 || static_cast<int64_t>(v.size()) <= keep) return;
    std::vector<Pair> out;
    const double stride = static_cast<double>(v.size()) / static_cast<double>(keep);
    for (int64_t i = 0; i < keep; ++i)
      out.push_back(v[static_cast<size_t>(static_cast<double>(i) * stride)]);
    v = std::move(out);
  };
  thin(ds.train, n_train);
  thin(ds.test, n_test);
  return ds;
}

SymbolVocab::SymbolVocab(const std::vector<Pair>& train) {
  for (const auto& p : train)
    for (const auto& s : p.tgt)
      if (ids.emplace(s, SpecialTokens::kCount + static_cast<int64_t>(symbols.size())).second)
        symbols.push_back(s);
}

int64_t SymbolVocab::size() const {
  return SpecialTokens::kCount + static_cast<int64_t>(symbols.size());
}

std::vector<int64_t> SymbolVocab::encode(const std::vector<std::string>& s) const {
  std::vector<int64_t> out;
  for (const auto& x : s) {
    auto it = ids.find(x);
    out.push_back(it == ids.end() ? SpecialTokens::kUnk : it->second);
  }
  return out;
}

std::string SymbolVocab::name(int64_t id) const {
  if (id >= SpecialTokens::kCount && id < size())
    return symbols[static_cast<size_t>(id - SpecialTokens::kCount)];
  return id == SpecialTokens::kEos ? "<eos>" : "<unk>";
}

int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace nabla::examples::seq2seq
