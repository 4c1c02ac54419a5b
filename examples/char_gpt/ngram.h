// A character n-gram model as the yardstick for char_gpt: interpolated absolute discounting
// (Ney, Essen and Kneser 1994, "On structuring probabilistic dependences in stochastic language
// modelling"), i.e. Kneser-Ney's interpolation without its continuation counts:
//
//   p(c | h) = max(N(h c) - D, 0) / N(h) + D * T(h) / N(h) * p(c | h')
//
// where h' is h without its first character, N(h c) counts h followed by c in the training
// text, N(h) = sum over c of N(h c), T(h) the number of distinct characters seen after h, and
// the recursion ends at the empty context interpolated with the uniform distribution over the
// vocabulary. A context never seen in training (N(h) = 0) passes p(c | h') through unchanged.
// The text is one stream: contexts run across verse boundaries ('\n' is a character).
//
// With D = 0.75 on the char_gpt split this gives 1.0703 nats/char at order 7 and 1.1627 at
// order 5 (issue 20's 1.070 and 1.163; tests/examples/test_char_gpt.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace char_gpt {

// Counts keyed by a packed sequence of ids: a leading 1 bit, then bits_per_id bits per id, so
// sequences of different lengths never share a key. Open addressing with linear probing.
class PackedCounts {
 public:
  struct Entry {
    uint64_t key = 0;  // 0: empty (a real key always has its leading 1 bit)
    uint32_t count = 0, distinct = 0;
  };
  Entry& at(uint64_t key);  // inserts a zero entry if missing
  const Entry* find(uint64_t key) const;
  size_t size() const { return used_; }

 private:
  void grow();
  std::vector<Entry> slots_ = std::vector<Entry>(1 << 16);
  size_t used_ = 0;
};

class NgramModel {
 public:
  // order >= 1 (1: unigram); ids in [0, vocab). order * bits per id must fit 63 bits.
  NgramModel(int order, double discount, int64_t vocab);
  void train(const std::vector<int64_t>& ids);
  // p(ids[i] | the order - 1 ids before it) for each i, the first i with shorter contexts.
  double nats_per_char(const std::vector<int64_t>& ids) const;
  // p(c | context), context = the last ids before c (only the last order - 1 are used).
  double probability(const int64_t* context, int64_t context_len, int64_t c) const;
  int order() const { return order_; }
  size_t ngram_types() const { return ngrams_.size(); }

 private:
  int order_;
  double discount_;
  int64_t vocab_;
  int bits_;
  PackedCounts ngrams_;    // N(h c) for |h c| in [1, order]
  PackedCounts contexts_;  // N(h) as count and T(h) as distinct, for |h| in [0, order - 1]
};

}  // namespace char_gpt
