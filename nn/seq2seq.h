// RNN sequence to sequence, in the variants the literature compares:
//   - Bahdanau attention (Bahdanau et al. 2015; d2l 10.4), the default: the decoder attends at
//     every step over all encoder outputs with its top hidden state as the query
//     (AdditiveAttention, masked by the source valid lengths) and feeds the context, joined with
//     the embedded input token, to its RNN.
//   - No attention (Cho et al. 2014, Sutskever et al. 2014; d2l 10.7): the context is the final
//     encoder state (top layer), one fixed vector c fed with every input token.
//   - A bidirectional encoder (Bahdanau et al. 2015, section 3.2): the annotations are forward
//     and backward states concatenated (2H); the decoder starts from tanh(W_s h_back), the
//     backward direction's final state through a linear layer ("bridge", the paper's appendix
//     A.2, plus a bias), per layer. An LSTM decoder's first cell state is the backward
//     direction's final cell state as is (a simpler choice than the paper, which has no cell).
//   - GRU or LSTM cells in both encoder and decoder.
// Module and parameter names follow d2l, so a d2l state dict of the default variant loads as is.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nabla/nn/attention.h"
#include "nabla/nn/generation.h"
#include "nabla/nn/gru.h"
#include "nabla/nn/layers.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/lstm.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

enum class Seq2SeqRNN { kGRU, kLSTM };
enum class Seq2SeqAttention { kBahdanau, kNone };

// The optional arguments of Seq2SeqEncoder and AttentionDecoder (RNNOptions' names first).
struct Seq2SeqOptions {
  int64_t num_layers = 1;
  double dropout = 0;  // between RNN layers, and on the decoder's attention weights
  DType dtype = kFloat32;
  Seq2SeqRNN rnn = Seq2SeqRNN::kGRU;
  bool bidirectional = false;  // the encoder's RNN
  Seq2SeqAttention attention = Seq2SeqAttention::kBahdanau;
};

// The variant as the seq2seq_attention example's flags: "--rnn lstm --attention none
// --bidirectional" (no --bidirectional for a unidirectional encoder).
std::string seq2seq_flags(const Seq2SeqOptions& options);

// What the encoder returns: the RNN's output and final states (D = 2 if bidirectional).
struct EncoderOutput {
  Tensor output;  // (S, B, D*H)
  Tensor h_n;     // (D*num_layers, B, H)
  Tensor c_n;     // the LSTM's cell states as h_n; undefined for a GRU
  friend std::vector<Tensor*> module_outputs(EncoderOutput& o) {
    if (o.c_n.defined()) return {&o.output, &o.h_n, &o.c_n};
    return {&o.output, &o.h_n};
  }
};

// embedding (vocab, E) -> rnn GRU or LSTM (E, H, num_layers, dropout, bidirectional).
class Seq2SeqEncoder : public Module {
 public:
  Seq2SeqEncoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                 const Seq2SeqOptions& options = {});
  // X (B, S) int64 tokens -> output (S, B, D*H) and the final states (D*num_layers, B, H).
  EncoderOutput forward(const Tensor& X) const;
  EncoderOutput operator()(const Tensor& X) const { return call(&Seq2SeqEncoder::forward, X); }
  const Embedding& embedding() const { return *embedding_; }
  const RNNBase& rnn() const;
  const Seq2SeqOptions& options() const { return options_; }

 private:
  Seq2SeqOptions options_;
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<GRU> gru_;  // one of the two, registered as "rnn"
  std::shared_ptr<LSTM> lstm_;
};

// What the decoder carries from step to step.
struct DecoderState {
  Tensor enc_outputs;     // (B, S, D*H): the attention's keys and values
  Tensor hidden;          // (num_layers, B, H): the decoder RNN's state
  Tensor enc_valid_lens;  // (B,) int64, or undefined: every source position counts
  Tensor cell;            // (num_layers, B, H): the decoder LSTM's cell state; undefined for a GRU
  Tensor context;         // (B, D*H): the fixed context without attention; else undefined
};

// attention AdditiveAttention(H, D*H, H, dropout) (none without attention), embedding (vocab,
// E), rnn GRU or LSTM (D*H + E, H, num_layers, dropout) over [context; embedding] (d2l's order),
// dense (H, vocab), and with a bidirectional encoder bridge Linear(H, H).
class AttentionDecoder : public Module {
 public:
  AttentionDecoder(int64_t vocab_size, int64_t embed_size, int64_t num_hiddens,
                   const Seq2SeqOptions& options = {});
  // From the encoder's output (S, B, D*H) and final states (D*num_layers, B, H).
  DecoderState init_state(const EncoderOutput& encoded, const Tensor& enc_valid_lens) const;
  // X (B, T) int64 tokens (teacher forcing, or one step at a time) -> logits (B, T, vocab);
  // advances state.hidden (and state.cell).
  Tensor forward(const Tensor& X, DecoderState& state);
  Tensor operator()(const Tensor& X, DecoderState& state) {
    return call(&AttentionDecoder::forward, X, state);
  }
  // (B, T, S): the attention weights of every step of the last forward, detached; undefined
  // without attention.
  Tensor attention_weights() const;

  int64_t vocab_size() const { return dense_->out_features(); }
  int64_t num_hiddens() const { return rnn().hidden_size(); }
  int64_t num_layers() const { return rnn().num_layers(); }
  const RNNBase& rnn() const;
  const Seq2SeqOptions& options() const { return options_; }

 private:
  Seq2SeqOptions options_;
  std::shared_ptr<AdditiveAttention> attention_;  // null without attention
  std::shared_ptr<Embedding> embedding_;
  std::shared_ptr<GRU> gru_;  // one of the two, registered as "rnn"
  std::shared_ptr<LSTM> lstm_;
  std::shared_ptr<Linear> dense_;
  std::shared_ptr<Linear> bridge_;    // bidirectional encoder only
  std::vector<Tensor> step_weights_;  // (B, 1, S) per step
};

class EncoderDecoder : public Module {
 public:
  // The encoder's and decoder's hidden size, layer count, RNN kind and bidirectional flag must
  // agree (the encoder's final state starts the decoder).
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
    Tensor attention;  // (steps, S): one row per decoding step, the eos step included; undefined
                       // without attention
  };
  // d2l's predict_seq2seq: encodes src (S,), then feeds back the argmax token from bos until eos
  // or max_len steps. Runs in eval mode (restoring the previous mode) without recording a graph.
  Decoded greedy_decode(const Tensor& src, int64_t src_valid_len, int64_t bos, int64_t eos,
                        int64_t max_len);

  // The variant (rnn, bidirectional, attention) a state dict of an EncoderDecoder was saved
  // from, read off its names and shapes; nullopt if it is not one.
  static std::optional<Seq2SeqOptions> variant_of(const StateDict& dict);
  // A ValueError naming the flags that differ when `dict` is another variant's state (a
  // checkpoint written with other --rnn / --attention / --bidirectional flags). Call it before
  // load_state_dict, whose own message would only list names and shapes.
  void check_variant(const StateDict& dict) const;
  Seq2SeqOptions variant() const;

  Seq2SeqEncoder& encoder() { return *encoder_; }
  AttentionDecoder& decoder() { return *decoder_; }

 private:
  std::shared_ptr<Seq2SeqEncoder> encoder_;
  std::shared_ptr<AttentionDecoder> decoder_;
};

// The decoder as a NextToken (nn/generation.h), so nn::greedy, nn::sample and nn::beam_search
// decode an EncoderDecoder, several sources at once. The constructor encodes src (B, S) int64
// (valid lengths (B,) int64, or undefined) once, without recording a graph; each row's decoder
// state (hidden and cell states, the encoder outputs and valid lengths, or the fixed context)
// travels with it: reorder index_selects every part along the batch, reset returns to the
// encoded state. Prompts start with bos; logits feeds the new tokens to the decoder, which keeps
// its state, so a step costs one decoder step. The model runs in its current mode: call eval()
// first to decode without dropout.
class Seq2SeqNextToken final : public NextToken {
 public:
  Seq2SeqNextToken(EncoderDecoder& model, const Tensor& src, const Tensor& src_valid_lens);
  int64_t vocab_size() const override { return decoder_.vocab_size(); }
  Tensor logits(const Tensor& new_tokens) override;  // (B, n) int64 -> (B, V)
  void reorder(const Tensor& batch_index) override;
  void reset() override { state_ = encoded_; }
  const DecoderState& state() const { return state_; }

 private:
  AttentionDecoder& decoder_;
  DecoderState encoded_, state_;
};

}  // namespace nabla::nn
