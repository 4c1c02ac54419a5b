// Shared by the sequence-to-sequence examples (seq2seq_attention, transformer_g2p): (source,
// target symbols) pairs, the CMU Pronouncing Dictionary as grapheme-to-phoneme pairs, the target
// vocabulary, the training batches, and the scores: exact-match word accuracy and phoneme error
// rate (edit distance / reference length), overall and by source-word length.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nabla/data/dataloader.h"

namespace nabla::examples {

// One source string (tokenised by characters) and its target as a list of symbols.
struct Pair {
  std::string src;
  std::vector<std::string> tgt;
};

struct Dataset {
  std::vector<Pair> train, test;
};

// festlex-cmu's path when the package is installed, else where scripts/get-cmudict.sh unpacks
// the .deb (it avoids installing festival).
std::string default_cmu_dir();

// Words of dir/cmudict-0.4.out and their phonemes (stress marks dropped); 1 word in 10, by hash,
// is a test word. n_train, n_test > 0 keep an evenly spaced subset of each split. A missing file
// is an IOError, a file without a single entry a ValueError.
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

// A training batch of encoded pairs for teacher forcing.
struct PairBatch {
  data::PaddedBatch src;   // the sources as given (their <eos> included), padded with PAD
  Tensor tgt_in, tgt_out;  // (B, T): <bos> y..., and y... <eos>, padded with PAD
  int64_t source_tokens = 0, target_tokens = 0;  // padding excluded; targets with their <eos>
};

// Pairs idx of (src, tgt) as one batch; src[i] and tgt[i] are the i-th pair's token ids.
PairBatch make_pair_batch(const std::vector<std::vector<int64_t>>& src,
                          const std::vector<std::vector<int64_t>>& tgt,
                          const std::vector<int64_t>& idx);

// The training batches of both examples: the pairs cut into batches of equal source length
// (length_buckets, examples/common/training.h), so a recurrent encoder's final state, the
// decoder's first, never runs over padding, as when one word is decoded alone; the batch order
// shuffled per epoch from `seed`. src and tgt must outlive the loader.
std::unique_ptr<data::DataLoader<PairBatch>> pair_loader(
    const std::vector<std::vector<int64_t>>& src, const std::vector<std::vector<int64_t>>& tgt,
    int64_t batch_size, uint64_t seed);

// Levenshtein distance between two symbol sequences.
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Word accuracy and phoneme (symbol) error rate of decoded words, overall and in bins of the
// source word's length: 1-4, 5-8, 9-12, 13+ characters. Attention should flatten the rise of
// the error with length that a fixed-size context vector shows (Bahdanau et al. 2015, fig. 2).
class G2pScores {
 public:
  struct Bin {
    std::string label;  // "1-4", ..., "13+"
    int64_t words = 0, correct = 0, edits = 0, reference_symbols = 0;
    double word_accuracy() const;
    double per() const;
  };

  G2pScores();
  // One decoded word: its source length in characters, the prediction and the reference.
  void add(size_t source_length, const std::vector<int64_t>& predicted,
           const std::vector<int64_t>& reference);
  const Bin& total() const { return total_; }
  double word_accuracy() const { return total_.word_accuracy(); }
  double per() const { return total_.per(); }
  const std::vector<Bin>& by_length() const { return bins_; }

  // The bins as a table on stdout.
  void print_by_length() const;
  // path: "model,length,words,per,word_accuracy", one row per bin, `model` naming the run.
  void write_length_csv(const std::string& path, const std::string& model) const;

 private:
  Bin total_;
  std::vector<Bin> bins_;
};

// PER by source length from CSVs written by write_length_csv drawn as one chart, path.png and
// path.svg: one series per model found, in order of appearance. names: empty, or one per file
// (an empty one keeps the file's model column) to rename a file's series in the legend. Throws
// IOError for an unreadable file, FormatError for a malformed row.
void plot_per_by_length(const std::string& path, const std::vector<std::string>& csv_files,
                        const std::vector<std::string>& names = {});

}  // namespace nabla::examples
