#include "examples/seq2seq_attention/decoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "examples/common/plot.h"
#include "nabla/nabla.h"
#include "nabla/nn/generation.h"

namespace nabla::examples::seq2seq {

using data::SpecialTokens;

namespace {

// Test pairs decoded side by side in beam search (times the width: the model's rows).
constexpr size_t kBeamBatch = 64;

// Eval mode for a scope, the previous mode restored on every exit path.
struct EvalMode {
  nn::Module& model;
  bool was_training;
  explicit EvalMode(nn::Module& m) : model(m), was_training(m.is_training()) { m.eval(); }
  ~EvalMode() { model.train(was_training); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;
};

// Greedy decoding of test pair i.
nn::EncoderDecoder::Decoded greedy(nn::EncoderDecoder& model, const Seq2SeqData& d, size_t i) {
  const auto& s = d.test.src[i];
  return model.greedy_decode(from_vector(s, {std::ssize(s)}), std::ssize(s), SpecialTokens::kBos,
                             SpecialTokens::kEos, static_cast<int64_t>(d.max_tgt) + 5);
}

// Beam search over test pairs idx, whose sources all have one length (no padding: a recurrent
// encoder's final state is then what the pair alone gives). Returns each pair's target symbols
// without <eos>.
std::vector<std::vector<int64_t>> beam_batch(nn::EncoderDecoder& model, const Seq2SeqData& d,
                                             const std::vector<size_t>& idx, int64_t beam) {
  const auto n = std::ssize(idx);
  const auto length = std::ssize(d.test.src[idx[0]]);
  std::vector<int64_t> src;
  for (size_t i : idx) src.insert(src.end(), d.test.src[i].begin(), d.test.src[i].end());
  nn::Seq2SeqNextToken next(model, from_vector(src, {n, length}),
                            full({n}, static_cast<double>(length), kInt64));
  const nn::BeamResult r =
      nn::beam_search(next, full({n, 1}, static_cast<double>(SpecialTokens::kBos), kInt64),
                      {.width = beam,
                       .max_new = static_cast<int64_t>(d.max_tgt) + 5,
                       .end_token = SpecialTokens::kEos});
  const auto sequences = r.sequences.contiguous().to_vector<int64_t>();
  const auto lengths = r.lengths.contiguous().to_vector<int64_t>();
  const int64_t width = r.sequences.size(2);
  std::vector<std::vector<int64_t>> out(idx.size());
  for (int64_t k = 0; k < n; ++k) {  // num_return = 1: pair k's best; after <bos>, before <eos>
    const int64_t* row = &sequences[static_cast<size_t>(k * width)];
    for (int64_t t = 1; t < lengths[static_cast<size_t>(k)] && row[t] != SpecialTokens::kEos; ++t)
      out[static_cast<size_t>(k)].push_back(row[t]);
  }
  return out;
}

// The test pairs evaluate() scores: `limit` of them (0: all) at an even stride.
std::vector<size_t> eval_indices(size_t total, int64_t limit) {
  const size_t stride =
      limit > 0 ? std::max<size_t>(1, total / static_cast<size_t>(limit)) : size_t{1};
  std::vector<size_t> idx;
  for (size_t i = 0; i < total && (limit <= 0 || std::ssize(idx) < limit); i += stride)
    idx.push_back(i);
  return idx;
}

}  // namespace

Scores evaluate(nn::EncoderDecoder& model, const Seq2SeqData& d, int64_t limit, int64_t beam) {
  EvalMode eval_mode(model);
  const std::vector<size_t> idx = eval_indices(d.test.src.size(), limit);
  std::vector<std::vector<int64_t>> decoded(d.test.src.size());
  if (beam <= 1) {
    for (size_t i : idx) decoded[i] = greedy(model, d, i).tokens;
  } else {
    std::map<size_t, std::vector<size_t>> by_length;  // source length -> pairs
    for (size_t i : idx) by_length[d.test.src[i].size()].push_back(i);
    for (const auto& same_length : by_length) {
      const std::vector<size_t>& pairs = same_length.second;
      for (size_t first = 0; first < pairs.size(); first += kBeamBatch) {
        const std::vector<size_t> part(pairs.begin() + static_cast<std::ptrdiff_t>(first),
                                       pairs.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                           pairs.size(), first + kBeamBatch)));
        auto out = beam_batch(model, d, part, beam);
        for (size_t k = 0; k < part.size(); ++k) decoded[part[k]] = std::move(out[k]);
      }
    }
  }
  G2pScores s;
  for (size_t i : idx) s.add(d.test.src[i].size() - 1, decoded[i], d.test.tgt[i]);  // - 1: <eos>
  return Scores{s.word_accuracy(), s.per(), s};
}

void save_attention(nn::EncoderDecoder& model, const Seq2SeqData& d, bool g2p,
                    const std::string& out) {
  for (size_t k = 0; k < 3 && k < d.test.src.size(); ++k) {
    const size_t i = k * d.test.src.size() / 3;
    const auto decoded = greedy(model, d, i);
    const bool attends = decoded.attention.defined();  // not with --attention none
    const auto steps = attends ? static_cast<size_t>(decoded.attention.size(0)) : size_t{0},
               cols = attends ? static_cast<size_t>(decoded.attention.size(1)) : size_t{0};
    std::vector<std::string> row_labels, col_labels = data::utf8_chars(d.pairs.test[i].src);
    col_labels.push_back("<eos>");
    for (size_t r = 0; r < steps; ++r)
      row_labels.push_back(r < decoded.tokens.size() ? d.tgt_vocab.name(decoded.tokens[r])
                                                     : "<eos>");
    std::vector<std::string> pred;
    for (int64_t t : decoded.tokens) pred.push_back(d.tgt_vocab.name(t));
    const std::string sep = g2p ? " " : "";
    fmt::print("  \"{}\" -> \"{}\" (reference \"{}\")\n", d.pairs.test[i].src, fmt::join(pred, sep),
               fmt::join(d.pairs.test[i].tgt, sep));
    if (!attends) continue;
    viz::heatmap(
        fmt::format("{}/attention_{}.png", out, k),
        viz::matrix_rows(decoded.attention.contiguous().to_vector<float>(), steps, cols),
        {.title = fmt::format("attention: {} \u2192 {}", d.pairs.test[i].src, fmt::join(pred, sep)),
         .xlabel = "source",
         .ylabel = "output",
         .row_labels = row_labels,
         .col_labels = col_labels});
  }
}

}  // namespace nabla::examples::seq2seq
