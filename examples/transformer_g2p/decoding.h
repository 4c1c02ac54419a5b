// Decoding the test words with transformer_g2p's model: greedy and beam search in batches of
// words through the KV cache, their scores, and the cross-attention maps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/g2p_data.h"
#include "examples/transformer_g2p/model.h"
#include "nabla/data/tokenizer.h"

namespace nabla::examples::g2p {

// The words as the model sees them: each source letters <eos>, each target its phoneme ids.
struct EncodedWords {
  std::vector<std::vector<int64_t>> src, tgt;
};

struct DecodeOptions {
  int64_t beam = 1;      // 1: greedy (nn::greedy), else nn::beam_search of this width
  int64_t max_new = 32;  // phonemes at most, <eos> included
  int64_t batch = 256;   // words decoded side by side
};

// The phonemes (without <eos>) decoded for words[idx[k]], k in order. Words of similar length
// are batched together; the source padding is masked, so a word decodes as it would alone.
std::vector<std::vector<int64_t>> decode_words(const G2pTransformer& model,
                                               const EncodedWords& words,
                                               const std::vector<size_t>& idx,
                                               const DecodeOptions& options);

// `limit` words spread evenly over the set (0 or more than there are: all of them). Not the
// first ones: the CMU test split is in dictionary order (acronyms and names in "aa..." first).
std::vector<size_t> spread_indices(size_t total, int64_t limit);

// Decodes words[idx] and scores them against their targets.
G2pScores score_words(const G2pTransformer& model, const EncodedWords& words,
                      const std::vector<size_t>& idx, const DecodeOptions& options);

// The cross-attention of the last decoder layer while the model reads `word` and writes its
// greedy pronunciation: <out>/<stem>_head<h>.png for each head and <stem>_mean.png, letters
// (rows) x phonemes (columns). Returns the pronunciation's phoneme ids.
std::vector<int64_t> save_cross_attention(const G2pTransformer& model, const std::string& word,
                                          const std::vector<int64_t>& src, const SymbolVocab& vocab,
                                          int64_t max_new, const std::string& out,
                                          const std::string& stem);

}  // namespace nabla::examples::g2p
