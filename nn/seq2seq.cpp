// Bahdanau seq2seq: encoder, attention decoder and the encoder-decoder wrapper.
#include "nabla/nn/seq2seq.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/ops/reduce_dim.h"
#include "nabla/ops/shape.h"

namespace nabla::nn {

namespace {

void check_tokens(const char* who, const char* what, const Tensor& t) {
  if (t.dtype() != kInt64 || t.dim() != 2)
    throw ShapeError(fmt::format("{}: {} must be int64 (B, T) tokens, got {} {}", who, what,
                                 dtype_name(t.dtype()), shape_str(t.shape())));
}

}  // namespace

// ----------------------------------------------------------------------------
// Seq2SeqEncoder

Seq2SeqEncoder::Seq2SeqEncoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                               const Seq2SeqOptions& o)
    : Module("Seq2SeqEncoder") {
  embedding_ = register_module(
      "embedding",
      std::make_shared<Embedding>(vocab_size, embed_size, EmbeddingOptions{.dtype = o.dtype}));
  rnn_ = register_module(
      "rnn", std::make_shared<GRU>(
                 embed_size, num_hiddens,
                 GRUOptions{.num_layers = o.num_layers, .dropout = o.dropout, .dtype = o.dtype}));
}

GRU::Output Seq2SeqEncoder::forward(const Tensor& X) const {
  check_tokens("Seq2SeqEncoder", "the source", X);
  Tensor emb = (*embedding_)(X);        // (B, S, E)
  return (*rnn_)(emb.transpose(0, 1));  // (S, B, H), (L, B, H)
}

// ----------------------------------------------------------------------------
// AttentionDecoder
//   per step t:  query = hidden[-1] (B, 1, H)
//                context = AdditiveAttention(query, enc_outputs, enc_outputs, valid_lens)
//                output, hidden = GRU([context; embedding(X[:, t])], hidden)
//   logits = dense(outputs)

AttentionDecoder::AttentionDecoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                                   const Seq2SeqOptions& o)
    : Module("AttentionDecoder") {
  attention_ = register_module("attention",
                               std::make_shared<AdditiveAttention>(
                                   num_hiddens, num_hiddens, num_hiddens,
                                   AttentionScorerOptions{.dropout = o.dropout, .dtype = o.dtype}));
  embedding_ = register_module(
      "embedding",
      std::make_shared<Embedding>(vocab_size, embed_size, EmbeddingOptions{.dtype = o.dtype}));
  rnn_ = register_module(
      "rnn", std::make_shared<GRU>(
                 embed_size + num_hiddens, num_hiddens,
                 GRUOptions{.num_layers = o.num_layers, .dropout = o.dropout, .dtype = o.dtype}));
  dense_ = register_module(
      "dense", std::make_shared<Linear>(num_hiddens, vocab_size, LinearOptions{.dtype = o.dtype}));
}

DecoderState AttentionDecoder::init_state(const GRU::Output& encoded,
                                          const Tensor& enc_valid_lens) const {
  const Tensor& out = encoded.output;  // (S, B, H)
  const Tensor& h = encoded.h_n;       // (L, B, H)
  const int64_t H = num_hiddens(), L = num_layers();
  if (out.dim() != 3 || out.size(2) != H || h.dim() != 3 || h.size(0) != L ||
      h.size(1) != out.size(1) || h.size(2) != H)
    throw ShapeError(fmt::format(
        "AttentionDecoder: expected encoder output (S, B, {}) and state ({}, B, {}), got {} and {}",
        H, L, H, shape_str(out.shape()), shape_str(h.shape())));
  if (enc_valid_lens.defined() && (enc_valid_lens.dtype() != kInt64 || enc_valid_lens.dim() != 1 ||
                                   enc_valid_lens.size(0) != out.size(1)))
    throw ShapeError(fmt::format("AttentionDecoder: enc_valid_lens must be int64 ({},), got {} {}",
                                 out.size(1), dtype_name(enc_valid_lens.dtype()),
                                 shape_str(enc_valid_lens.shape())));
  return {out.transpose(0, 1), h, enc_valid_lens};
}

Tensor AttentionDecoder::forward(const Tensor& X, DecoderState& state) {
  check_tokens("AttentionDecoder", "the input", X);
  const int64_t B = X.size(0), T = X.size(1);
  if (!state.enc_outputs.defined() || state.enc_outputs.size(0) != B)
    throw ShapeError(
        fmt::format("AttentionDecoder: input {} and state enc_outputs {} disagree "
                    "on the batch size",
                    shape_str(X.shape()),
                    state.enc_outputs.defined() ? shape_str(state.enc_outputs.shape())
                                                : std::string("(undefined)")));
  const AttentionMask mask(state.enc_valid_lens);
  Tensor emb = (*embedding_)(X);  // (B, T, E)
  step_weights_.clear();
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < T; ++t) {
    Tensor query = state.hidden.select(0, -1).unsqueeze(1);  // (B, 1, H)
    Tensor context = (*attention_)(query, state.enc_outputs, state.enc_outputs, mask);
    Tensor x = cat({context, emb.narrow(1, t, 1)}, -1);  // (B, 1, H + E)
    GRU::Output step = (*rnn_)(x.transpose(0, 1), state.hidden);
    state.hidden = step.h_n;         // (L, B, H)
    outputs.push_back(step.output);  // (1, B, H)
    step_weights_.push_back(attention_->attention_weights());
  }
  if (T == 0) return zeros({B, 0, vocab_size()}, dense_->weight().dtype());
  return (*dense_)(cat(outputs, 0)).transpose(0, 1);  // (B, T, vocab)
}

Tensor AttentionDecoder::attention_weights() const {
  if (step_weights_.empty()) return Tensor();
  return cat(step_weights_, 1);  // (B, T, S)
}

// ----------------------------------------------------------------------------
// EncoderDecoder

EncoderDecoder::EncoderDecoder(std::shared_ptr<Seq2SeqEncoder> encoder,
                               std::shared_ptr<AttentionDecoder> decoder)
    : Module("EncoderDecoder") {
  if (!encoder || !decoder) throw ValueError("EncoderDecoder: encoder and decoder must be set");
  const GRU& enc = encoder->rnn();
  if (enc.hidden_size() != decoder->num_hiddens() || enc.num_layers() != decoder->num_layers())
    throw ValueError(fmt::format(
        "EncoderDecoder: the encoder's GRU (hidden {}, {} layers) must match the decoder's "
        "(hidden {}, {} layers)",
        enc.hidden_size(), enc.num_layers(), decoder->num_hiddens(), decoder->num_layers()));
  encoder_ = register_module("encoder", std::move(encoder));
  decoder_ = register_module("decoder", std::move(decoder));
}

Tensor EncoderDecoder::forward(const Tensor& src, const Tensor& tgt_in,
                               const Tensor& src_valid_lens) {
  check_tokens("EncoderDecoder", "src", src);
  check_tokens("EncoderDecoder", "tgt_in", tgt_in);
  if (src.size(0) != tgt_in.size(0))
    throw ShapeError(fmt::format("EncoderDecoder: src {} and tgt_in {} differ in batch size",
                                 shape_str(src.shape()), shape_str(tgt_in.shape())));
  DecoderState state = decoder_->init_state((*encoder_)(src), src_valid_lens);
  return (*decoder_)(tgt_in, state);
}

EncoderDecoder::Decoded EncoderDecoder::greedy_decode(const Tensor& src, int64_t src_valid_len,
                                                      int64_t bos, int64_t eos, int64_t max_len) {
  const int64_t V = decoder_->vocab_size();
  if (src.dtype() != kInt64 || src.dim() != 1)
    throw ShapeError(fmt::format("greedy_decode: src must be int64 (S,), got {} {}",
                                 dtype_name(src.dtype()), shape_str(src.shape())));
  if (bos < 0 || bos >= V || eos < 0 || eos >= V)  // token ids index the vocabulary
    throw IndexError(fmt::format(
        "greedy_decode: bos {} and eos {} must be in [0, {}), the target vocabulary", bos, eos, V));
  if (src_valid_len < 0 || max_len < 0)
    throw ValueError(fmt::format("greedy_decode: src_valid_len {} and max_len {} must be >= 0",
                                 src_valid_len, max_len));
  // Eval mode for the duration (no dropout), restored on every exit path.
  struct ModeRestore {
    Module& m;
    bool was_training;
    ~ModeRestore() { m.train(was_training); }
  } restore{*this, is_training()};
  eval();
  NoGradGuard no_grad;

  DecoderState state = decoder_->init_state((*encoder_)(src.unsqueeze(0)),
                                            from_vector<int64_t>({src_valid_len}, {1}));
  Decoded result;
  std::vector<Tensor> rows;
  Tensor dec_x = from_vector<int64_t>({bos}, {1, 1});
  for (int64_t step = 0; step < max_len; ++step) {
    Tensor logits = (*decoder_)(dec_x, state);  // (1, 1, V)
    dec_x = argmax(logits, 2);                  // (1, 1)
    const auto token = dec_x.item<int64_t>();
    rows.push_back(decoder_->attention_weights().reshape({1, -1}));  // (1, S)
    if (token == eos) break;
    result.tokens.push_back(token);
  }
  result.attention =
      rows.empty() ? zeros({0, src.size(0)}, encoder_->embedding().weight().dtype()) : cat(rows, 0);
  return result;
}

}  // namespace nabla::nn
