// Bahdanau-attention sequence to sequence (Bahdanau et al. 2015; d2l 10.4): a GRU encoder, and a
// GRU decoder that at every step attends over all encoder outputs with its top hidden state as
// the query (AdditiveAttention, masked by the source valid lengths) and feeds the context, joined
// with the embedded input token, to its GRU. Module and parameter names follow d2l, so a d2l
// state dict loads as is.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nabla/nn/attention.h"
#include "nabla/nn/gru.h"
#include "nabla/nn/layers.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

// The optional arguments of Seq2SeqEncoder and AttentionDecoder (GRUOptions' names).
struct Seq2SeqOptions {
  int64_t num_layers = 1;
  double dropout = 0;  // between GRU layers, and on the decoder's attention weights
  DType dtype = kFloat32;
};

// embedding (vocab, E) -> GRU(E, H, num_layers, dropout).
class Seq2SeqEncoder : public Module {
 public:
  Seq2SeqEncoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                 const Seq2SeqOptions& options = {});
  // X (B, S) int64 tokens -> output (S, B, H) and h_n (num_layers, B, H).
  GRU::Output forward(const Tensor& X) const;
  GRU::Output operator()(const Tensor& X) const { return call(&Seq2SeqEncoder::forward, X); }
  const Embedding& embedding() const { return *embedding_; }
  const GRU& rnn() const { return *rnn_; }

 private:
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<GRU> rnn_;
};

// What the decoder carries from step to step.
struct DecoderState {
  Tensor enc_outputs;     // (B, S, H): the attention's keys and values
  Tensor hidden;          // (num_layers, B, H): the decoder GRU's state
  Tensor enc_valid_lens;  // (B,) int64, or undefined: every source position counts
};

// attention AdditiveAttention(H, H, H, dropout), embedding (vocab, E),
// rnn GRU(H + E, H, num_layers, dropout) over [context; embedding] (d2l's order), dense (H, vocab).
class AttentionDecoder : public Module {
 public:
  AttentionDecoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                   const Seq2SeqOptions& options = {});
  // From the encoder's output (S, B, H) and h_n (num_layers, B, H).
  DecoderState init_state(const GRU::Output& encoded, const Tensor& enc_valid_lens) const;
  // X (B, T) int64 tokens (teacher forcing, or one step at a time) -> logits (B, T, vocab);
  // advances state.hidden.
  Tensor forward(const Tensor& X, DecoderState& state);
  Tensor operator()(const Tensor& X, DecoderState& state) {
    return call(&AttentionDecoder::forward, X, state);
  }
  // (B, T, S): the attention weights of every step of the last forward, detached.
  Tensor attention_weights() const;

  int64_t vocab_size() const { return dense_->out_features(); }
  int64_t num_hiddens() const { return rnn_->hidden_size(); }
  int64_t num_layers() const { return rnn_->num_layers(); }

 private:
  std::shared_ptr<AdditiveAttention> attention_;
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<GRU> rnn_;
  std::shared_ptr<Linear> dense_;
  std::vector<Tensor> step_weights_;  // (B, 1, S) per step
};

class EncoderDecoder : public Module {
 public:
  // The encoder's and decoder's hidden size and layer count must agree (the encoder's final
  // state starts the decoder).
  EncoderDecoder(std::shared_ptr<Seq2SeqEncoder> encoder,
                 std::shared_ptr<AttentionDecoder> decoder);
  // Teacher forcing: src (B, S) and tgt_in (B, T) int64, src_valid_lens (B,) int64 or
  // undefined -> logits (B, T, vocab).
  Tensor forward(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid_lens);
  Tensor operator()(const Tensor& src, const Tensor& tgt_in, const Tensor& src_valid_lens) {
    return call(&EncoderDecoder::forward, src, tgt_in, src_valid_lens);
  }

  struct Decoded {
    std::vector<int64_t> tokens;  // without bos and eos
    Tensor attention;             // (steps, S): one row per decoding step, the eos step included
  };
  // d2l's predict_seq2seq: encodes src (S,), then feeds back the argmax token from bos until eos
  // or max_len steps. Runs in eval mode (restoring the previous mode) without recording a graph.
  Decoded greedy_decode(const Tensor& src, int64_t src_valid_len, int64_t bos, int64_t eos,
                        int64_t max_len);

  Seq2SeqEncoder& encoder() { return *encoder_; }
  AttentionDecoder& decoder() { return *decoder_; }

 private:
  std::shared_ptr<Seq2SeqEncoder> encoder_;
  std::shared_ptr<AttentionDecoder> decoder_;
};

}  // namespace nabla::nn
