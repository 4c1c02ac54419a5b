// nn::GRU: gru_cell over differentiable ops, run by RNNBase's loop (nn/rnn_base.cpp).
#include "nabla/nn/gru.h"

#include "nabla/ops/arithmetic.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/unary.h"

namespace nabla::nn {

// ----------------------------------------------------------------------------
// gru_cell
//   gh = W_hh h + b_hh;  [r, z] = sigmoid(gi[:2H] + gh[:2H])
//   n = tanh(gi[2H:] + r * gh[2H:]);  h' = (1 - z) * n + z * h = n + z * (h - n)
Tensor gru_cell(const Tensor& gi, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  const int64_t H = h.size(-1);
  Tensor gh = linear(h, w_hh, b_hh);                                       // (B, 3H)
  Tensor rz = sigmoid(gi.narrow(-1, 0, 2 * H) + gh.narrow(-1, 0, 2 * H));  // (B, 2H)
  Tensor r = rz.narrow(-1, 0, H), z = rz.narrow(-1, H, H);
  Tensor n = tanh(gi.narrow(-1, 2 * H, H) + r * gh.narrow(-1, 2 * H, H));  // (B, H)
  return n + z * (h - n);
}

// ----------------------------------------------------------------------------
// GRU

GRU::GRU(int64_t input_size, int64_t hidden_size, const GRUOptions& options)
    : RNNBase("GRU", input_size, hidden_size, /*gates=*/3, options) {}

GRU::Output GRU::forward(const Tensor& x, const Tensor& h0) const {
  Result r =
      run(x, {h0}, {"h0"}, [](const Tensor& gi, const std::vector<Tensor>& s, const Weights& w) {
        return std::vector<Tensor>{gru_cell(gi, s[0], w.w_hh, w.b_hh)};
      });
  return {r.output, r.final[0]};
}

}  // namespace nabla::nn
