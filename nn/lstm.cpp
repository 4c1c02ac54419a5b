// nn::LSTM: lstm_cell over differentiable ops, run by RNNBase's loop (nn/rnn_base.cpp).
#include "nabla/nn/lstm.h"

#include <fmt/format.h>

#include "nabla/core/error.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/unary.h"

namespace nabla::nn {

// ----------------------------------------------------------------------------
// lstm_cell
//   gates = gi + W_hh h + b_hh (B, 4H);  [i, f] = sigmoid(gates[:2H]), g = tanh(gates[2H:3H]),
//   o = sigmoid(gates[3H:]);  c' = f * c + i * g;  h' = o * tanh(c')
std::vector<Tensor> lstm_cell(const Tensor& gi, const Tensor& h, const Tensor& c,
                              const Tensor& w_hh, const Tensor& b_hh) {
  const int64_t H = h.size(-1);
  Tensor gates = gi + linear(h, w_hh, b_hh);         // (B, 4H)
  Tensor i_f = sigmoid(gates.narrow(-1, 0, 2 * H));  // (B, 2H)
  Tensor g = tanh(gates.narrow(-1, 2 * H, H));       // (B, H)
  Tensor o = sigmoid(gates.narrow(-1, 3 * H, H));    // (B, H)
  Tensor c_next = i_f.narrow(-1, H, H) * c + i_f.narrow(-1, 0, H) * g;
  return {o * tanh(c_next), c_next};
}

// ----------------------------------------------------------------------------
// LSTM

LSTM::LSTM(int64_t input_size, int64_t hidden_size, const LSTMOptions& options)
    : RNNBase("LSTM", input_size, hidden_size, /*gates=*/4, options) {}

LSTM::Output LSTM::forward(const Tensor& x, const Tensor& h0, const Tensor& c0) const {
  if (h0.defined() != c0.defined())
    throw ValueError(fmt::format("LSTM: h0 and c0 must be given together or not at all, got {}",
                                 h0.defined() ? "h0 only" : "c0 only"));
  Result r = run(x, {h0, c0}, {"h0", "c0"},
                 [](const Tensor& gi, const std::vector<Tensor>& s, const Weights& w) {
                   return lstm_cell(gi, s[0], s[1], w.w_hh, w.b_hh);
                 });
  return {r.output, r.final[0], r.final[1]};
}

}  // namespace nabla::nn
