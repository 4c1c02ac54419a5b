#include "examples/common/g2p_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "examples/common/plot.h"
#include "examples/common/training.h"
#include "nabla/core/error.h"
#include "nabla/data/langid.h"
#include "nabla/data/tokenizer.h"

namespace nabla::examples {

using data::SpecialTokens;

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
    throw IOError(fmt::format(
        "load_cmu: {} not found. Unpack the CMU dictionary from Debian's festlex-cmu "
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
  if (ds.train.empty() || ds.test.empty())
    throw ValueError(fmt::format(
        "load_cmu: {} has {} training and {} test entries; expected lines like "
        "(\"word\" nil (((w er d) 1))) with words of a-z and ' (is it the festlex-cmu file?)",
        path, ds.train.size(), ds.test.size()));
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

PairBatch make_pair_batch(const std::vector<std::vector<int64_t>>& src,
                          const std::vector<std::vector<int64_t>>& tgt,
                          const std::vector<int64_t>& idx) {
  std::vector<std::vector<int64_t>> s, tin, tout;
  PairBatch b;
  for (int64_t i : idx) {
    s.push_back(src[static_cast<size_t>(i)]);
    const auto& y = tgt[static_cast<size_t>(i)];
    tin.push_back({SpecialTokens::kBos});
    tin.back().insert(tin.back().end(), y.begin(), y.end());
    tout.push_back(y);
    tout.back().push_back(SpecialTokens::kEos);
    b.source_tokens += std::ssize(s.back());
    b.target_tokens += std::ssize(tout.back());
  }
  b.src = data::pad_sequences(s, SpecialTokens::kPad);
  b.tgt_in = data::pad_sequences(tin, SpecialTokens::kPad).tokens;
  b.tgt_out = data::pad_sequences(tout, SpecialTokens::kPad).tokens;
  return b;
}

std::unique_ptr<data::DataLoader<PairBatch>> pair_loader(
    const std::vector<std::vector<int64_t>>& src, const std::vector<std::vector<int64_t>>& tgt,
    int64_t batch_size, uint64_t seed) {
  if (src.size() != tgt.size())
    throw ValueError(fmt::format("pair_loader: {} sources but {} targets", src.size(), tgt.size()));
  std::vector<size_t> lengths;
  for (const auto& s : src) lengths.push_back(s.size());
  auto buckets = length_buckets(lengths, batch_size, seed);
  const auto n = std::ssize(buckets);
  data::DataLoader<PairBatch>::Options options;
  options.batch_size = 1;  // one "item" = one pre-built length bucket
  options.seed = seed;
  return std::make_unique<data::DataLoader<PairBatch>>(
      n, options,
      [&src, &tgt, buckets = std::move(buckets)](const std::vector<int64_t>& bucket_ids) {
        return make_pair_batch(src, tgt, buckets[static_cast<size_t>(bucket_ids[0])]);
      });
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

// ---- scores -------------------------------------------------------------------------------
double G2pScores::Bin::word_accuracy() const {
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, words));
}

double G2pScores::Bin::per() const {
  return static_cast<double>(edits) / static_cast<double>(std::max<int64_t>(1, reference_symbols));
}

G2pScores::G2pScores() : total_{"all"}, bins_{{"1-4"}, {"5-8"}, {"9-12"}, {"13+"}} {}

void G2pScores::add(size_t source_length, const std::vector<int64_t>& predicted,
                    const std::vector<int64_t>& reference) {
  const int64_t edits = edit_distance(predicted, reference);
  Bin& bin = bins_[std::min<size_t>(3, source_length == 0 ? 0 : (source_length - 1) / 4)];
  for (Bin* b : {&total_, &bin}) {
    b->words += 1;
    b->correct += predicted == reference;
    b->edits += edits;
    b->reference_symbols += static_cast<int64_t>(reference.size());
  }
}

void G2pScores::print_by_length() const {
  fmt::print("  {:>7} {:>6} {:>7} {:>9}\n", "length", "words", "PER", "word acc");
  for (const Bin& b : bins_) {
    if (b.words == 0)
      fmt::print("  {:>7} {:>6} {:>7} {:>9}\n", b.label, 0, "-", "-");
    else
      fmt::print("  {:>7} {:>6} {:>7.4f} {:>9.4f}\n", b.label, b.words, b.per(), b.word_accuracy());
  }
}

void G2pScores::write_length_csv(const std::string& path, const std::string& model) const {
  std::ofstream out(path);
  if (!out) throw IOError(fmt::format("G2pScores::write_length_csv: cannot write {}", path));
  out << "model,length,words,per,word_accuracy\n";
  for (const Bin& b : bins_)  // an empty bin has no rate: nan, which the plot leaves out
    out << (b.words == 0 ? fmt::format("{},{},0,nan,nan\n", model, b.label)
                         : fmt::format("{},{},{},{:.6f},{:.6f}\n", model, b.label, b.words, b.per(),
                                       b.word_accuracy()));
  if (!out) throw IOError(fmt::format("G2pScores::write_length_csv: cannot write {}", path));
}

void plot_per_by_length(const std::string& path, const std::vector<std::string>& csv_files,
                        const std::vector<std::string>& names) {
  static const std::vector<std::string> kBins = {"1-4", "5-8", "9-12", "13+"};
  if (!names.empty() && names.size() != csv_files.size())
    throw ValueError(
        fmt::format("plot_per_by_length: {} names for {} files", names.size(), csv_files.size()));
  std::vector<viz::Series> series;
  for (size_t k = 0; k < csv_files.size(); ++k) {
    const std::string& file = csv_files[k];
    std::ifstream in(file);
    if (!in) throw IOError(fmt::format("plot_per_by_length: cannot read {}", file));
    std::string line;
    std::getline(in, line);  // the header
    for (int64_t row = 2; std::getline(in, line); ++row) {
      if (line.empty()) continue;
      std::vector<std::string> f;
      std::stringstream ss(line);
      for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
      auto bin = kBins.end();
      double per = 0;
      if (f.size() == 5) {
        bin = std::find(kBins.begin(), kBins.end(), f[1]);
        char* end = nullptr;
        per = std::strtod(f[3].c_str(), &end);
        if (end == f[3].c_str() || *end != '\0') bin = kBins.end();
      }
      if (bin == kBins.end())
        throw FormatError(fmt::format(
            "plot_per_by_length: {} line {}: expected model,length,words,per,word_accuracy with "
            "length one of 1-4, 5-8, 9-12, 13+; got \"{}\"",
            file, row, line));
      const std::string model = names.empty() || names[k].empty() ? f[0] : names[k];
      auto s = std::find_if(series.begin(), series.end(),
                            [&](const viz::Series& x) { return x.label == model; });
      if (s == series.end()) {
        series.push_back({.label = model,
                          .color = viz::kPalette[series.size() % std::size(viz::kPalette)],
                          .markers = true});
        s = series.end() - 1;
      }
      s->x.push_back(2.5 + 4.0 * static_cast<double>(bin - kBins.begin()));  // the bin's middle
      s->y.push_back(per);
    }
  }
  if (series.empty())
    throw ValueError(fmt::format("plot_per_by_length: no rows in {}", fmt::join(csv_files, ", ")));
  viz::line_plot(
      path, series,
      {.title = "phoneme error rate by word length",
       .xlabel = "letters in the source word (bins 1-4, 5-8, 9-12, 13+; at their middle)",
       .ylabel = "PER"});
}

}  // namespace nabla::examples
