// What the seq2seq tests share: the model built from one options struct, and the small task they
// train on (reverse a sequence of words).
#pragma once
#include <memory>
#include <vector>

#include "nabla/nn/seq2seq.h"
#include "tests/helpers.h"
#include "tests/nn/module_gradcheck.h"

namespace nabla::test {

inline Tensor tokens(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }

// Encoder and decoder of the same variant: vocabulary V, embedding E, hidden size H.
inline std::shared_ptr<nn::EncoderDecoder> make_seq2seq(int64_t V, int64_t E, int64_t H,
                                                        const nn::Seq2SeqOptions& o = {}) {
  return std::make_shared<nn::EncoderDecoder>(std::make_shared<nn::Seq2SeqEncoder>(V, E, H, o),
                                              std::make_shared<nn::AttentionDecoder>(V, E, H, o));
}

// Every variant: GRU or LSTM, Bahdanau attention or none, a unidirectional or bidirectional
// encoder (the default, GRU + Bahdanau + unidirectional, first).
inline std::vector<nn::Seq2SeqOptions> seq2seq_variants() {
  std::vector<nn::Seq2SeqOptions> v;
  for (auto rnn : {nn::Seq2SeqRNN::kGRU, nn::Seq2SeqRNN::kLSTM})
    for (auto att : {nn::Seq2SeqAttention::kBahdanau, nn::Seq2SeqAttention::kNone})
      for (bool bi : {false, true})
        v.push_back({.rnn = rnn, .bidirectional = bi, .attention = att});
  return v;
}

// A float64 model of vocabulary 5: teacher forcing on two sources (valid lengths 3 and 2) equals
// feeding the decoder one step at a time, and gradcheck passes for every parameter.
inline void check_teacher_forcing_and_gradcheck(nn::EncoderDecoder& model) {
  Tensor src = tokens({1, 2, 3, 4, 0, 2}, {2, 3}), tgt = tokens({0, 1, 3, 4}, {2, 2});
  Tensor valid = tokens({3, 2}, {2});
  Tensor logits = model(src, tgt, valid);
  REQUIRE(logits.shape() == Shape{2, 2, 5});
  nn::DecoderState state = model.decoder().init_state(model.encoder()(src), valid);
  Tensor step0 = model.decoder()(tgt.narrow(1, 0, 1), state);
  Tensor step1 = model.decoder()(tgt.narrow(1, 1, 1), state);
  CHECK_CLOSE(cat({step0, step1}, 1), logits, 1e-12, 0);
  CHECK_MODULE_GRADCHECK(model, (std::vector<Tensor>{}),
                         [&](const std::vector<Tensor>&) { return model(src, tgt, valid); });
}

// Tokens: 0 pad, 1 bos, 2 eos, 3..7 words (V = 8). N sources of S random words; the target is
// the source reversed, then eos.
struct ReversalTask {
  static constexpr int64_t V = 8, S = 4, N = 24;
  Tensor words, tgt_in, tgt_out, valid;  // (N, S), (N, S + 1), (N, S + 1), (N,)
  std::vector<int64_t> tgt_out_ids;      // tgt_out row by row
};

inline ReversalTask reversal_task() {
  using T = ReversalTask;
  Generator gen(5);
  std::vector<int64_t> w = randint(0, 5, {T::N, T::S}, gen).to_vector<int64_t>(), tin, tout;
  for (int64_t& t : w) t += 3;
  for (int64_t i = 0; i < T::N; ++i) {
    tin.push_back(1);
    for (int64_t j = T::S - 1; j >= 0; --j) tin.push_back(w[static_cast<size_t>(i * T::S + j)]);
    for (int64_t j = T::S - 1; j >= 0; --j) tout.push_back(w[static_cast<size_t>(i * T::S + j)]);
    tout.push_back(2);
  }
  return {tokens(w, {T::N, T::S}), tokens(tin, {T::N, T::S + 1}), tokens(tout, {T::N, T::S + 1}),
          full({T::N}, double(T::S), kInt64), tout};
}

}  // namespace nabla::test
