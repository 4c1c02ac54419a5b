#include "examples/transformer_g2p/decoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "examples/common/plot.h"
#include "nabla/data/dataloader.h"
#include "nabla/nn/generation.h"

namespace nabla::examples::g2p {

using data::SpecialTokens;

namespace {

// A decoded row: the tokens after the prompt's <bos>, up to the first <eos> (excluded).
std::vector<int64_t> phonemes_of(const int64_t* row, int64_t length) {
  std::vector<int64_t> out;
  for (int64_t t = 1; t < length && row[t] != SpecialTokens::kEos; ++t) out.push_back(row[t]);
  return out;
}

// One batch of words: greedy or beam search over the model's cached decoder.
std::vector<std::vector<int64_t>> decode_batch(const G2pTransformer& model,
                                               const std::vector<std::vector<int64_t>>& src,
                                               const DecodeOptions& o) {
  const data::PaddedBatch padded = data::pad_sequences(src, SpecialTokens::kPad);
  const auto b = static_cast<int64_t>(src.size());
  const Tensor memory = model.encode(padded.tokens, padded.key_padding_mask);
  CachedDecoder decoder(model, memory, padded.key_padding_mask, o.max_new + 1);
  const Tensor prompt = full({b, 1}, static_cast<double>(SpecialTokens::kBos), kInt64);
  std::vector<std::vector<int64_t>> out;
  if (o.beam <= 1) {
    const Tensor seq = nn::greedy(decoder, prompt, o.max_new, SpecialTokens::kEos);
    const auto flat = seq.contiguous().to_vector<int64_t>();
    const int64_t width = seq.size(1);
    for (int64_t i = 0; i < b; ++i)
      out.push_back(phonemes_of(&flat[static_cast<size_t>(i * width)], width));
    return out;
  }
  const nn::BeamResult r = nn::beam_search(
      decoder, prompt, {.width = o.beam, .max_new = o.max_new, .end_token = SpecialTokens::kEos});
  const auto flat = r.sequences.contiguous().to_vector<int64_t>();
  const auto lengths = r.lengths.contiguous().to_vector<int64_t>();
  const int64_t width = r.sequences.size(2);
  for (int64_t i = 0; i < b; ++i)  // num_return = 1: row i's best sequence
    out.push_back(
        phonemes_of(&flat[static_cast<size_t>(i * width)], lengths[static_cast<size_t>(i)]));
  return out;
}

}  // namespace

std::vector<std::vector<int64_t>> decode_words(const G2pTransformer& model,
                                               const EncodedWords& words,
                                               const std::vector<size_t>& idx,
                                               const DecodeOptions& options) {
  NoGradGuard no_grad;
  // Sorted by source length, so a batch pads little; results go back to idx's order.
  std::vector<size_t> order(idx.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return words.src[idx[a]].size() < words.src[idx[b]].size();
  });
  std::vector<std::vector<int64_t>> out(idx.size());
  const auto batch = static_cast<size_t>(std::max<int64_t>(1, options.batch));
  for (size_t first = 0; first < order.size(); first += batch) {
    const size_t last = std::min(order.size(), first + batch);
    std::vector<std::vector<int64_t>> src;
    for (size_t k = first; k < last; ++k) src.push_back(words.src[idx[order[k]]]);
    auto decoded = decode_batch(model, src, options);
    for (size_t k = first; k < last; ++k) out[order[k]] = std::move(decoded[k - first]);
  }
  return out;
}

std::vector<size_t> spread_indices(size_t total, int64_t limit) {
  const size_t n = limit > 0 ? std::min(total, static_cast<size_t>(limit)) : total;
  std::vector<size_t> idx;
  for (size_t k = 0; k < n; ++k) idx.push_back(k * total / n);
  return idx;
}

G2pScores score_words(const G2pTransformer& model, const EncodedWords& words,
                      const std::vector<size_t>& idx, const DecodeOptions& options) {
  const auto decoded = decode_words(model, words, idx, options);
  G2pScores scores;
  for (size_t k = 0; k < idx.size(); ++k)  // source length: the letters, without <eos>
    scores.add(words.src[idx[k]].size() - 1, decoded[k], words.tgt[idx[k]]);
  return scores;
}

std::vector<int64_t> save_cross_attention(const G2pTransformer& model, const std::string& word,
                                          const std::vector<int64_t>& src, const SymbolVocab& vocab,
                                          int64_t max_new, const std::string& out,
                                          const std::string& stem) {
  NoGradGuard no_grad;
  const auto s = static_cast<int64_t>(src.size());
  const Tensor tokens = from_vector(src, {1, s});
  const Tensor padding = zeros({1, s}, kBool);
  const std::vector<int64_t> phonemes =
      decode_words(model, {{src}, {{}}}, {0}, {.max_new = max_new})[0];
  // Teacher-forced on its own output, the decoder repeats the greedy steps; a hook on the last
  // layer's cross-attention keeps its query (the layer's normed input) to recompute the weights
  // per head (the layer itself asks for none: it runs the fused kernel).
  std::vector<int64_t> tgt_in = {SpecialTokens::kBos};
  tgt_in.insert(tgt_in.end(), phonemes.begin(), phonemes.end());
  const auto t = static_cast<int64_t>(tgt_in.size());
  const Tensor memory = model.encode(tokens, padding);
  const auto& decoder = *model.transformer().decoder();
  nn::MultiheadAttention& cross = *decoder.layer(decoder.num_layers() - 1)->multihead_attn();
  Tensor query;
  {
    nn::ScopedHook hook(
        cross.register_forward_hook([&](const nn::Module&, const std::vector<Tensor>& in,
                                        const std::vector<Tensor>&) { query = in[0]; }));
    model.decode(from_vector(tgt_in, {1, t}), 0, memory, padding);
  }
  const Tensor weights =
      cross.forward(query, memory, memory, {.need_weights = true, .average_attn_weights = false})
          .weights.select(0, 0);  // (H, T, S)
  std::vector<std::string> letters, outputs;
  for (char ch : word) letters.emplace_back(1, ch);
  letters.emplace_back("<eos>");
  for (int64_t p : phonemes) outputs.push_back(vocab.name(p));
  outputs.emplace_back("<eos>");
  std::vector<std::string> names;
  for (int64_t p : phonemes) names.push_back(vocab.name(p));
  const std::string title = fmt::format("{} \u2192 {}", word, fmt::join(names, " "));
  auto draw = [&](const Tensor& ts, const std::string& file, const std::string& what) {
    const Tensor st = ts.transpose(0, 1).contiguous();  // letters x phonemes
    viz::heatmap(
        out + "/" + file,
        viz::matrix_rows(st.to_vector<float>(), static_cast<size_t>(s), static_cast<size_t>(t)),
        {.title = fmt::format("cross-attention ({}): {}", what, title),
         .xlabel = "phoneme written",
         .ylabel = "letter read",
         .row_labels = letters,
         .col_labels = outputs});
  };
  const int64_t heads = weights.size(0);
  for (int64_t h = 0; h < heads; ++h)
    draw(weights.select(0, h), fmt::format("{}_head{}.png", stem, h), fmt::format("head {}", h));
  draw(mean(weights, {0}), stem + "_mean.png", fmt::format("mean of {} heads", heads));
  return phonemes;
}

}  // namespace nabla::examples::g2p
