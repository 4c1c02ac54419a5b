// nn::LSTM: a multi-layer, optionally bidirectional long short-term memory (Hochreiter &
// Schmidhuber 1997, with the forget gate of Gers et al. 2000) with torch.nn.LSTM's parameters,
// names, shapes, initialisation and gate order (i, f, g, o), so weights load both ways. For
// layer l and time step t:
//   i = sigmoid(W_ii x + b_ii + W_hi h + b_hi)    f = sigmoid(W_if x + b_if + W_hf h + b_hf)
//   g = tanh(W_ig x + b_ig + W_hg h + b_hg)       o = sigmoid(W_io x + b_io + W_ho h + b_ho)
//   c' = f * c + i * g                            h' = o * tanh(c')
// Layers, directions and the hoisted input projection: nn/rnn_base.h. No proj_size.
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/nn/rnn_base.h"

namespace nabla::nn {

using LSTMOptions = RNNOptions;

class LSTM : public RNNBase {
 public:
  struct Output {
    Tensor output;  // (T, B, D*H), or (B, T, D*H) if batch_first; (T, D*H) unbatched (D = 2
                    // if bidirectional, else 1)
    Tensor h_n;     // (D*num_layers, B, H); (D*num_layers, H) for an unbatched input
    Tensor c_n;     // the cell states, as h_n
    friend std::vector<Tensor*> module_outputs(Output& o) { return {&o.output, &o.h_n, &o.c_n}; }
  };
  // PyTorch's (h_0, c_0) tuple, for lstm(x, {h0, c0}).
  struct State {
    Tensor h, c;
  };

  // Parameters per layer l: weight_ih_l{l} (4H, in), weight_hh_l{l} (4H, H), bias_ih_l{l} (4H),
  // bias_hh_l{l} (4H), then the same with suffix _reverse if bidirectional; rows in gate order
  // i, f, g, o; all ~ U(-1/sqrt(H), 1/sqrt(H)). Layers after the first take D*H inputs.
  LSTM(int64_t input_size, int64_t hidden_size, const LSTMOptions& options = {});

  // x (T, B, input_size) (or (B, T, input_size) if batch_first, or unbatched (T, input_size));
  // h0 and c0 (D*num_layers, B, H) or (D*num_layers, H) unbatched, both given or both
  // undefined (zeros).
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor()) const;
  Output operator()(const Tensor& x, const Tensor& h0 = Tensor(),
                    const Tensor& c0 = Tensor()) const {
    return call(&LSTM::forward, x, h0, c0);
  }
  Output operator()(const Tensor& x, const State& state) const {
    return call(&LSTM::forward, x, state.h, state.c);
  }
};

// One LSTM step for a batch: gi = W_ih x + b_ih (B, 4H) precomputed, h and c (B, H) ->
// {h', c'}.
std::vector<Tensor> lstm_cell(const Tensor& gi, const Tensor& h, const Tensor& c,
                              const Tensor& w_hh, const Tensor& b_hh);

}  // namespace nabla::nn
