// RNN seq2seq: encoder, decoder (Bahdanau attention or a fixed context) and the encoder-decoder
// wrapper.
#include "nabla/nn/seq2seq.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/reduce_dim.h"
#include "nabla/ops/shape.h"
#include "nabla/ops/unary.h"

namespace nabla::nn {

namespace {

void check_tokens(const char* who, const char* what, const Tensor& t) {
  if (t.dtype() != kInt64 || t.dim() != 2)
    throw ShapeError(fmt::format("{}: {} must be int64 (B, T) tokens, got {} {}", who, what,
                                 dtype_name(t.dtype()), shape_str(t.shape())));
}

// One GRU or LSTM run; c0 and the result's c are the LSTM's cell states.
struct Recurrence {
  Tensor output, h, c;
};
Recurrence run_rnn(const GRU* gru, const LSTM* lstm, const Tensor& x, const Tensor& h0,
                   const Tensor& c0) {
  if (lstm) {
    LSTM::Output o = (*lstm)(x, h0, c0);
    return {o.output, o.h_n, o.c_n};
  }
  GRU::Output o = (*gru)(x, h0);
  return {o.output, o.h_n, Tensor()};
}

// The GRU or LSTM the options ask for; the other pointer stays null.
void make_rnn(std::shared_ptr<GRU>& gru, std::shared_ptr<LSTM>& lstm, int64_t input, int64_t hidden,
              const Seq2SeqOptions& o, bool bidirectional) {
  const RNNOptions ro{.num_layers = o.num_layers,
                      .dropout = o.dropout,
                      .bidirectional = bidirectional,
                      .dtype = o.dtype};
  if (o.rnn == Seq2SeqRNN::kLSTM)
    lstm = std::make_shared<LSTM>(input, hidden, ro);
  else
    gru = std::make_shared<GRU>(input, hidden, ro);
}

const char* rnn_name(Seq2SeqRNN r) { return r == Seq2SeqRNN::kLSTM ? "lstm" : "gru"; }
const char* attention_name(Seq2SeqAttention a) {
  return a == Seq2SeqAttention::kNone ? "none" : "bahdanau";
}

}  // namespace

std::string seq2seq_flags(const Seq2SeqOptions& o) {
  return fmt::format("--rnn {} --attention {}{}", rnn_name(o.rnn), attention_name(o.attention),
                     o.bidirectional ? " --bidirectional" : "");
}

// ----------------------------------------------------------------------------
// Seq2SeqEncoder

Seq2SeqEncoder::Seq2SeqEncoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                               const Seq2SeqOptions& o)
    : Module("Seq2SeqEncoder"), options_(o) {
  embedding_ = register_module(
      "embedding",
      std::make_shared<Embedding>(vocab_size, embed_size, EmbeddingOptions{.dtype = o.dtype}));
  make_rnn(gru_, lstm_, embed_size, num_hiddens, o, o.bidirectional);
  if (lstm_)
    register_module("rnn", lstm_);
  else
    register_module("rnn", gru_);
}

const RNNBase& Seq2SeqEncoder::rnn() const {
  if (lstm_) return *lstm_;
  return *gru_;
}

EncoderOutput Seq2SeqEncoder::forward(const Tensor& X) const {
  check_tokens("Seq2SeqEncoder", "the source", X);
  Tensor emb = (*embedding_)(X);  // (B, S, E)
  Recurrence r = run_rnn(gru_.get(), lstm_.get(), emb.transpose(0, 1), Tensor(), Tensor());
  return {r.output, r.h, r.c};  // (S, B, D*H), (D*L, B, H)
}

// ----------------------------------------------------------------------------
// AttentionDecoder
//   Bahdanau, per step t:  query = hidden[-1] (B, 1, H)
//                          context = AdditiveAttention(query, enc_outputs, enc_outputs, lens)
//                          output, hidden = RNN([context; embedding(X[:, t])], hidden)
//   none, all steps at once: output, hidden = RNN([c; embedding(X)], hidden), c fixed
//   logits = dense(outputs)

AttentionDecoder::AttentionDecoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                                   const Seq2SeqOptions& o)
    : Module("AttentionDecoder"), options_(o) {
  const int64_t C = (o.bidirectional ? 2 : 1) * num_hiddens;  // annotation / context size
  if (o.attention == Seq2SeqAttention::kBahdanau)
    attention_ = register_module(
        "attention", std::make_shared<AdditiveAttention>(
                         num_hiddens, C, num_hiddens,
                         AttentionScorerOptions{.dropout = o.dropout, .dtype = o.dtype}));
  embedding_ = register_module(
      "embedding",
      std::make_shared<Embedding>(vocab_size, embed_size, EmbeddingOptions{.dtype = o.dtype}));
  make_rnn(gru_, lstm_, embed_size + C, num_hiddens, o, /*bidirectional=*/false);
  if (lstm_)
    register_module("rnn", lstm_);
  else
    register_module("rnn", gru_);
  dense_ = register_module(
      "dense", std::make_shared<Linear>(num_hiddens, vocab_size, LinearOptions{.dtype = o.dtype}));
  if (o.bidirectional)
    bridge_ = register_module("bridge", std::make_shared<Linear>(num_hiddens, num_hiddens,
                                                                 LinearOptions{.dtype = o.dtype}));
}

const RNNBase& AttentionDecoder::rnn() const {
  if (lstm_) return *lstm_;
  return *gru_;
}

DecoderState AttentionDecoder::init_state(const EncoderOutput& encoded,
                                          const Tensor& enc_valid_lens) const {
  const Tensor& out = encoded.output;  // (S, B, D*H)
  const Tensor& h = encoded.h_n;       // (D*L, B, H)
  const int64_t H = num_hiddens(), L = num_layers(), D = options_.bidirectional ? 2 : 1;
  const bool lstm = options_.rnn == Seq2SeqRNN::kLSTM;
  if (out.dim() != 3 || out.size(2) != D * H || h.dim() != 3 || h.size(0) != D * L ||
      h.size(1) != out.size(1) || h.size(2) != H || encoded.c_n.defined() != lstm ||
      (lstm && encoded.c_n.shape() != h.shape()))
    throw ShapeError(fmt::format(
        "AttentionDecoder: expected encoder output (S, B, {}) and state ({}, B, {}){} ({}), got "
        "{} and {}{}",
        D * H, D * L, H, lstm ? " with cell states" : "", seq2seq_flags(options_),
        shape_str(out.shape()), shape_str(h.shape()),
        encoded.c_n.defined() ? " with cell states " + shape_str(encoded.c_n.shape()) : ""));
  if (enc_valid_lens.defined() && (enc_valid_lens.dtype() != kInt64 || enc_valid_lens.dim() != 1 ||
                                   enc_valid_lens.size(0) != out.size(1)))
    throw ShapeError(fmt::format("AttentionDecoder: enc_valid_lens must be int64 ({},), got {} {}",
                                 out.size(1), dtype_name(enc_valid_lens.dtype()),
                                 shape_str(enc_valid_lens.shape())));
  DecoderState s{out.transpose(0, 1), h, enc_valid_lens, encoded.c_n, Tensor()};
  if (D == 2) {
    // Per layer, the backward direction's final state (slots 1, 3, ...) through the bridge.
    const int64_t B = out.size(1);
    s.hidden = tanh((*bridge_)(h.reshape({L, 2, B, H}).select(1, 1)));  // (L, B, H)
    if (lstm) s.cell = encoded.c_n.reshape({L, 2, B, H}).select(1, 1);
  }
  if (!attention_)  // the top layer's final states: [forward; backward] when bidirectional
    s.context = D == 1 ? h.select(0, -1) : cat({h.select(0, -2), h.select(0, -1)}, -1);
  return s;
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
  if (!attention_ && !state.context.defined())
    throw ValueError(
        "AttentionDecoder: the state has no context; make it with this decoder's init_state");
  Tensor emb = (*embedding_)(X);  // (B, T, E)
  step_weights_.clear();
  if (T == 0) return zeros({B, 0, vocab_size()}, dense_->weight().dtype());
  if (!attention_) {
    const int64_t C = state.context.size(-1);
    Tensor x = cat({state.context.unsqueeze(1).expand({B, T, C}), emb}, -1);  // (B, T, C + E)
    Recurrence r = run_rnn(gru_.get(), lstm_.get(), x.transpose(0, 1), state.hidden, state.cell);
    state.hidden = r.h;
    state.cell = r.c;
    return (*dense_)(r.output).transpose(0, 1);  // (B, T, vocab)
  }
  const AttentionMask mask(state.enc_valid_lens);
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < T; ++t) {
    Tensor query = state.hidden.select(0, -1).unsqueeze(1);  // (B, 1, H)
    Tensor context = (*attention_)(query, state.enc_outputs, state.enc_outputs, mask);
    Tensor x = cat({context, emb.narrow(1, t, 1)}, -1);  // (B, 1, C + E)
    Recurrence r = run_rnn(gru_.get(), lstm_.get(), x.transpose(0, 1), state.hidden, state.cell);
    state.hidden = r.h;           // (L, B, H)
    state.cell = r.c;             // (L, B, H) or undefined
    outputs.push_back(r.output);  // (1, B, H)
    step_weights_.push_back(attention_->attention_weights());
  }
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
  const RNNBase& enc = encoder->rnn();
  const Seq2SeqOptions &eo = encoder->options(), &dop = decoder->options();
  if (enc.hidden_size() != decoder->num_hiddens() || enc.num_layers() != decoder->num_layers())
    throw ValueError(fmt::format(
        "EncoderDecoder: the encoder's RNN (hidden {}, {} layers) must match the decoder's "
        "(hidden {}, {} layers)",
        enc.hidden_size(), enc.num_layers(), decoder->num_hiddens(), decoder->num_layers()));
  if (eo.rnn != dop.rnn || eo.bidirectional != dop.bidirectional)
    throw ValueError(
        fmt::format("EncoderDecoder: the encoder ({}) and the decoder ({}) must agree on --rnn and "
                    "--bidirectional",
                    seq2seq_flags(eo), seq2seq_flags(dop)));
  encoder_ = register_module("encoder", std::move(encoder));
  decoder_ = register_module("decoder", std::move(decoder));
}

Seq2SeqOptions EncoderDecoder::variant() const {
  Seq2SeqOptions o = decoder_->options();
  o.bidirectional = encoder_->options().bidirectional;
  return o;
}

std::optional<Seq2SeqOptions> EncoderDecoder::variant_of(const StateDict& dict) {
  const Tensor *w_hh = nullptr, *reverse = nullptr, *attention = nullptr;
  for (const auto& [key, t] : dict) {
    if (key == "encoder.rnn.weight_hh_l0") w_hh = &t;
    if (key == "encoder.rnn.weight_hh_l0_reverse") reverse = &t;
    if (key == "decoder.attention.W_k.weight") attention = &t;
  }
  if (!w_hh || !w_hh->defined() || w_hh->dim() != 2 || w_hh->size(1) < 1) return std::nullopt;
  const int64_t gates = w_hh->size(0) / w_hh->size(1);  // GRU 3H rows, LSTM 4H
  if (w_hh->size(0) % w_hh->size(1) != 0 || (gates != 3 && gates != 4)) return std::nullopt;
  Seq2SeqOptions o;
  o.rnn = gates == 4 ? Seq2SeqRNN::kLSTM : Seq2SeqRNN::kGRU;
  o.bidirectional = reverse != nullptr;
  o.attention = attention ? Seq2SeqAttention::kBahdanau : Seq2SeqAttention::kNone;
  return o;
}

void EncoderDecoder::check_variant(const StateDict& dict) const {
  const std::optional<Seq2SeqOptions> theirs = variant_of(dict);
  if (!theirs) return;  // not a seq2seq state: load_state_dict's own message says what is wrong
  const Seq2SeqOptions ours = variant();
  std::vector<std::string> differ;
  if (theirs->rnn != ours.rnn) differ.push_back("--rnn");
  if (theirs->attention != ours.attention) differ.push_back("--attention");
  if (theirs->bidirectional != ours.bidirectional) differ.push_back("--bidirectional");
  if (differ.empty()) return;
  throw ValueError(fmt::format(
      "EncoderDecoder: the checkpoint is a '{}' model and this one is '{}': {} {}; run with the "
      "checkpoint's flags, or start afresh in another --out directory",
      seq2seq_flags(*theirs), seq2seq_flags(ours), fmt::join(differ, " and "),
      differ.size() == 1 ? "differs" : "differ"));
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
  const bool attends = variant().attention == Seq2SeqAttention::kBahdanau;
  Decoded result;
  std::vector<Tensor> rows;
  Tensor dec_x = from_vector<int64_t>({bos}, {1, 1});
  for (int64_t step = 0; step < max_len; ++step) {
    Tensor logits = (*decoder_)(dec_x, state);  // (1, 1, V)
    dec_x = argmax(logits, 2);                  // (1, 1)
    const auto token = dec_x.item<int64_t>();
    if (attends) rows.push_back(decoder_->attention_weights().reshape({1, -1}));  // (1, S)
    if (token == eos) break;
    result.tokens.push_back(token);
  }
  if (attends)
    result.attention = rows.empty()
                           ? zeros({0, src.size(0)}, encoder_->embedding().weight().dtype())
                           : cat(rows, 0);
  return result;
}

// ----------------------------------------------------------------------------
// Seq2SeqNextToken

Seq2SeqNextToken::Seq2SeqNextToken(EncoderDecoder& model, const Tensor& src,
                                   const Tensor& src_valid_lens)
    : decoder_(model.decoder()) {
  NoGradGuard no_grad;
  encoded_ = decoder_.init_state(model.encoder()(src), src_valid_lens);
  state_ = encoded_;
}

Tensor Seq2SeqNextToken::logits(const Tensor& new_tokens) {
  Tensor out = decoder_(new_tokens, state_);  // (B, n, V); checks the tokens and the batch
  if (out.size(1) == 0)
    throw ShapeError(fmt::format("Seq2SeqNextToken: new tokens must be (B, n) with n >= 1, got {}",
                                 shape_str(new_tokens.shape())));
  return out.select(1, out.size(1) - 1);
}

void Seq2SeqNextToken::reorder(const Tensor& batch_index) {
  // Batch-first parts along dim 0; the RNN states are (layers, B, H).
  auto pick = [&](Tensor& t, int64_t dim) {
    if (t.defined()) t = index_select(t, dim, batch_index);
  };
  pick(state_.enc_outputs, 0);
  pick(state_.enc_valid_lens, 0);
  pick(state_.context, 0);
  pick(state_.hidden, 1);
  pick(state_.cell, 1);
}

}  // namespace nabla::nn
