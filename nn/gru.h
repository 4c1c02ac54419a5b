// nn::GRU: a multi-layer, optionally bidirectional gated recurrent unit with torch.nn.GRU's
// parameters, names, shapes, initialisation and gate order, so weights load both ways. For layer
// l and time step t:
//   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
//   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
//   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
//   h' = (1 - z) * n + z * h
// Layers, directions and the hoisted input projection: nn/rnn_base.h.
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/nn/rnn_base.h"

namespace nabla::nn {

using GRUOptions = RNNOptions;

class GRU : public RNNBase {
 public:
  struct Output {
    Tensor output;  // (T, B, D*H), or (B, T, D*H) if batch_first; (T, D*H) unbatched (D = 2
                    // if bidirectional, else 1)
    Tensor h_n;     // (D*num_layers, B, H); (D*num_layers, H) for an unbatched input
    friend std::vector<Tensor*> module_outputs(Output& o) { return {&o.output, &o.h_n}; }
  };

  // Parameters per layer l: weight_ih_l{l} (3H, in), weight_hh_l{l} (3H, H), bias_ih_l{l} (3H),
  // bias_hh_l{l} (3H), then the same with suffix _reverse if bidirectional; rows in gate order
  // r, z, n; all ~ U(-1/sqrt(H), 1/sqrt(H)). Layers after the first take D*H inputs.
  GRU(int64_t input_size, int64_t hidden_size, const GRUOptions& options = {});
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias = true,
      bool batch_first = false, double dropout = 0, DType dtype = kFloat32)
      : GRU(input_size, hidden_size,
            GRUOptions{.num_layers = num_layers,
                       .bias = bias,
                       .batch_first = batch_first,
                       .dropout = dropout,
                       .dtype = dtype}) {}

  // x (T, B, input_size) (or (B, T, input_size) if batch_first, or unbatched (T, input_size));
  // h0 (D*num_layers, B, H) or (D*num_layers, H) unbatched, zeros if undefined.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor()) const;
  Output operator()(const Tensor& x, const Tensor& h0 = Tensor()) const {
    return call(&GRU::forward, x, h0);
  }
};

// One GRU step for a batch: gi = W_ih x + b_ih (B, 3H) precomputed, h (B, H) -> h' (B, H).
Tensor gru_cell(const Tensor& gi, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh);

}  // namespace nabla::nn
