// Decoding the test pairs with seq2seq_attention's model: greedy one pair at a time
// (EncoderDecoder::greedy_decode, which also gives the attention maps), beam search through
// nn::Seq2SeqNextToken in batches of equal-length sources, their scores and figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/g2p_data.h"
#include "nabla/data/tokenizer.h"
#include "nabla/nn/seq2seq.h"

namespace nabla::examples::seq2seq {

// The pairs as the model sees them: each source its characters and <eos>, each target its
// symbol ids.
struct Encoded {
  std::vector<std::vector<int64_t>> src, tgt;
};

// The pairs, the source characters' and target symbols' vocabularies, and each pair encoded.
struct Seq2SeqData {
  Dataset pairs;
  data::CharTokenizer src_tok;
  SymbolVocab tgt_vocab;
  Encoded train, test;
  size_t max_tgt = 0;  // the longest training target
};

struct Scores {
  double word_accuracy = 0, per = 0;  // exact matches; phoneme (symbol) error rate
  G2pScores detail;                   // the same, and by source length
};

// On `limit` test pairs spread evenly over the test set (0: all of it). Not the first ones: the
// CMU test split is in dictionary order, and its first 500 words (acronyms, names in "aa...")
// score 0.44 where the whole set scores 0.63. beam 1: greedy; else beam search of that width
// (length penalty 1). Runs in eval mode, restoring the model's mode.
Scores evaluate(nn::EncoderDecoder& model, const Seq2SeqData& d, int64_t limit, int64_t beam = 1);

// Three test pairs decoded greedily, printed and their attention (decoder steps x source
// characters) saved as <out>/attention_<k>.png (no heatmap with --attention none).
void save_attention(nn::EncoderDecoder& model, const Seq2SeqData& d, bool g2p,
                    const std::string& out);

}  // namespace nabla::examples::seq2seq
