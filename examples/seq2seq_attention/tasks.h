// The two tasks of seq2seq_attention as (source string, target symbols) pairs: synthetic dates
// to ISO form, and grapheme to phoneme on the CMU Pronouncing Dictionary; the target vocabulary
// and the edit distance behind the phoneme error rate.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace nabla::examples::seq2seq {

// One source string (tokenised by characters) and its target as a list of symbols.
struct Pair {
  std::string src;
  std::vector<std::string> tgt;
};

struct Dataset {
  std::vector<Pair> train, test;
};

// Dates drawn from a Generator seeded with `seed`, in seven human-readable formats -> ISO
// "yyyy-mm-dd". Test dates are those whose source text hashes to 0 mod 10, so no source is in
// both splits.
Dataset make_dates(int64_t n_train, int64_t n_test, uint64_t seed);

// festlex-cmu's path when the package is installed, else where scripts/get-cmudict.sh unpacks
// the .deb (it avoids installing festival).
std::string default_cmu_dir();

// Words of dir/cmudict-0.4.out and their phonemes (stress marks dropped); 1 word in 10, by hash,
// is a test word. n_train, n_test > 0 keep an evenly spaced subset of each split.
Dataset load_cmu(const std::string& dir, int64_t n_train, int64_t n_test);

// Target symbols (characters for dates, phonemes for g2p) after the special tokens, in order
// of first appearance in the training set.
struct SymbolVocab {
  std::vector<std::string> symbols;
  std::unordered_map<std::string, int64_t> ids;
  explicit SymbolVocab(const std::vector<Pair>& train);
  int64_t size() const;
  std::vector<int64_t> encode(const std::vector<std::string>& s) const;
  std::string name(int64_t id) const;
};

// Levenshtein distance between two symbol sequences.
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace nabla::examples::seq2seq
