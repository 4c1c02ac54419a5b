// transformer_langid's classifier and data, shared by its trainer (main.cpp) and
// examples/prune_langid: the sizes (flags), the model, the encoded corpus, batches and the test
// evaluation.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "examples/common/training.h"
#include "nabla/data/dataloader.h"
#include "nabla/data/langid.h"
#include "nabla/data/tokenizer.h"
#include "nabla/nabla.h"

namespace nabla::examples {

struct LangIdSize {
  int64_t d_model = 64, heads = 4, layers = 2, ffn = 256, max_len = 128;
  int64_t ngram_buckets = 8192;  // hashed byte bigram and trigram embeddings; 0 = bytes only
  double dropout = 0.1;
  bool checkpoint_layers = false;  // recompute the encoder layers' activations in backward
};

// Ids of the hashed byte n-grams ending at each position (fastText-style subword features), in
// [1, buckets); 0, the padding row, where the n-gram would begin before the text.
inline std::vector<int64_t> ngram_ids(const std::vector<int64_t>& tokens, size_t n,
                                      int64_t buckets) {
  std::vector<int64_t> ids(tokens.size(), 0);
  for (size_t t = n - 1; t < tokens.size(); ++t) {
    uint64_t h = 14695981039346656037ULL ^ n;  // FNV-1a over the n token ids
    for (size_t k = t + 1 - n; k <= t; ++k) {
      h ^= static_cast<uint64_t>(tokens[k]);
      h *= 1099511628211ULL;
    }
    ids[t] = 1 + static_cast<int64_t>(h % static_cast<uint64_t>(buckets - 1));
  }
  return ids;
}

// N(0, 1/d) rows, the padding row zero: after the x sqrt(d) scaling the input has unit scale,
// like the positional code (the paper's convention). N(0, 1) x sqrt(d) would drown the positions
// and saturate the first layer's attention.
inline void init_embedding(const nn::Embedding& e, int64_t d_model, int64_t padding_idx) {
  NoGradGuard no_grad;
  nn::init::normal_(e.weight(), 0.0, 1.0 / std::sqrt(static_cast<double>(d_model)));
  e.weight().select(0, padding_idx).zero_();
}

// The classifier: byte (+ hashed bigram and trigram) embeddings, the encoder stack, a mean-pool
// head. The n-gram embeddings give the encoder the local spelling cues that identify a language
// (a character n-gram Naive Bayes reaches 99.8% on this data) without a longer sequence.
class LangIdModel : public nn::Module {
 public:
  LangIdModel(const LangIdSize& c, int64_t vocab, int64_t classes)
      : Module("LangIdModel"), d_model_(c.d_model) {
    embedding_ = register_module(
        "embedding", std::make_shared<nn::Embedding>(vocab, c.d_model, data::SpecialTokens::kPad));
    if (c.ngram_buckets > 0) {
      bigrams_ = register_module("bigram_embedding",
                                 std::make_shared<nn::Embedding>(c.ngram_buckets, c.d_model, 0));
      trigrams_ = register_module("trigram_embedding",
                                  std::make_shared<nn::Embedding>(c.ngram_buckets, c.d_model, 0));
    }
    init_embedding(*embedding_, c.d_model, data::SpecialTokens::kPad);
    if (bigrams_) {
      init_embedding(*bigrams_, c.d_model, 0);
      init_embedding(*trigrams_, c.d_model, 0);
    }
    pos_ = register_module("pos_encoding",
                           std::make_shared<nn::PositionalEncoding>(c.d_model, c.dropout, 1024));
    nn::TransformerEncoderLayerOptions layer;
    layer.d_model = c.d_model;
    layer.nhead = c.heads;
    layer.dim_feedforward = c.ffn;
    layer.dropout = c.dropout;
    layer.batch_first = true;
    layer.norm_first = false;  // post-norm, as in "Attention Is All You Need" and d2l
    encoder_ =
        register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, c.layers));
    encoder_->set_checkpoint_layers(c.checkpoint_layers);
    head_ = register_module("head", std::make_shared<nn::Linear>(c.d_model, classes));
  }

  // tokens, bigrams, trigrams (B, T) int64 (n-gram ids unused without buckets),
  // key_padding_mask (B, T) bool (true = pad) -> logits (B, classes)
  Tensor forward(const Tensor& tokens, const Tensor& bigrams, const Tensor& trigrams,
                 const Tensor& key_padding_mask) const {
    Tensor x = embedding_->forward(tokens);
    if (bigrams_) x = add(add(x, bigrams_->forward(bigrams)), trigrams_->forward(trigrams));
    x = mul(x, std::sqrt(static_cast<double>(d_model_)));
    x = pos_->forward(x);                                                     // (B, T, d)
    x = encoder_->forward(x, Tensor(), key_padding_mask);                     // (B, T, d)
    Tensor keep = logical_not(key_padding_mask).to(x.dtype()).unsqueeze(-1);  // (B, T, 1)
    Tensor pooled = div(sum(mul(x, keep), {1}), sum(keep, {1}));              // (B, d)
    return head_->forward(pooled);
  }

  // The last layer keeps its per-head weights when on (nabla-serve's heatmap): the materialised
  // attention path instead of the fused one, which agree to float rounding.
  void store_attention(bool on) const {
    encoder_->layer(encoder_->num_layers() - 1)->set_store_attention(on);
  }
  const Tensor& last_attention() const {
    return encoder_->layer(encoder_->num_layers() - 1)->attention_weights();
  }

 private:
  int64_t d_model_;
  std::shared_ptr<nn::Embedding> embedding_, bigrams_, trigrams_;
  std::shared_ptr<nn::PositionalEncoding> pos_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

struct LangIdBatch {
  data::PaddedBatch padded;
  Tensor bigrams, trigrams;  // (B, T), padded with 0
  Tensor labels;
};

// A text as model input: its byte tokens and the hashed n-grams at each position.
struct Encoded {
  std::vector<int64_t> tokens, bigrams, trigrams;
};

// Length buckets of the texts' byte counts: similar-length batches waste little on padding.
inline std::vector<std::vector<int64_t>> length_buckets(const std::vector<Encoded>& seqs,
                                                        int64_t batch_size, uint64_t seed) {
  std::vector<size_t> lengths;
  for (const auto& e : seqs) lengths.push_back(e.tokens.size());
  return examples::length_buckets(lengths, batch_size, seed);
}

// The corpus and each text encoded once. smoke keeps an evenly spread slice (the trainer also
// caps the epochs at 2).
struct LangIdData {
  data::LangIdCorpus corpus;
  std::vector<Encoded> train, test;
};

inline LangIdData load_langid_data(const LangIdSize& c, bool smoke,
                                   const data::ByteTokenizer& tok) {
  LangIdData d{data::load_fortune_langid(), {}, {}};
  if (smoke) {
    auto thin = [](std::vector<data::TextExample>& v, size_t keep) {
      std::vector<data::TextExample> out;
      for (size_t i = 0; i < v.size() && out.size() < keep;
           i += std::max<size_t>(1, v.size() / keep))
        out.push_back(v[i]);
      v = std::move(out);
    };
    thin(d.corpus.train, 256);
    thin(d.corpus.test, 128);
  }
  const int64_t hash_buckets = std::max<int64_t>(c.ngram_buckets, 2);
  auto encode_all = [&](const std::vector<data::TextExample>& v) {
    std::vector<Encoded> seqs;
    for (const auto& ex : v) {
      Encoded e;
      e.tokens = tok.encode(ex.text, static_cast<size_t>(c.max_len));
      e.bigrams = ngram_ids(e.tokens, 2, hash_buckets);
      e.trigrams = ngram_ids(e.tokens, 3, hash_buckets);
      seqs.push_back(std::move(e));
    }
    return seqs;
  };
  d.train = encode_all(d.corpus.train);
  d.test = encode_all(d.corpus.test);
  return d;
}

// The examples `idx` of one split, padded to the longest.
inline LangIdBatch make_batch(const std::vector<Encoded>& seqs,
                              const std::vector<data::TextExample>& texts,
                              const std::vector<int64_t>& idx) {
  std::vector<std::vector<int64_t>> tokens, bigrams, trigrams;
  std::vector<int64_t> labels;
  for (int64_t i : idx) {
    const Encoded& e = seqs[static_cast<size_t>(i)];
    tokens.push_back(e.tokens);
    bigrams.push_back(e.bigrams);
    trigrams.push_back(e.trigrams);
    labels.push_back(texts[static_cast<size_t>(i)].label);
  }
  return LangIdBatch{data::pad_sequences(tokens, data::SpecialTokens::kPad),
                     data::pad_sequences(bigrams, 0).tokens,
                     data::pad_sequences(trigrams, 0).tokens,
                     from_vector(labels, {static_cast<int64_t>(labels.size())})};
}

// The confusion matrix and the mean cross-entropy over the whole test split (eval mode, no
// graph).
struct LangIdEvaluation {
  ConfusionMatrix confusion;
  double loss = 0;
};
inline LangIdEvaluation evaluate_langid(LangIdModel& model, const LangIdData& d) {
  NoGradGuard no_grad;
  model.eval();
  LangIdEvaluation e{ConfusionMatrix(d.corpus.languages)};
  for (const auto& idx : length_buckets(d.test, 256, 0)) {
    LangIdBatch b = make_batch(d.test, d.corpus.test, idx);
    const Tensor logits =
        model.forward(b.padded.tokens, b.bigrams, b.trigrams, b.padded.key_padding_mask);
    e.loss += cross_entropy(logits, b.labels, {.reduction = Reduction::Sum}).item() /
              static_cast<double>(d.test.size());
    e.confusion.add(b.labels, argmax(logits, -1));
  }
  model.train();
  return e;
}

}  // namespace nabla::examples
