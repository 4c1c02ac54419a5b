// nn::RNNBase: what nn::GRU and nn::LSTM share, as PyTorch's nn.RNNBase: the options, the
// parameters under PyTorch's names, the input and state checks, and the loop over layers,
// directions and time. The input projections W_ih x + b_ih of all time steps are one linear call
// per layer and direction; only the cell (the hidden projection and the gates) runs inside the
// time loop.
//
// Bidirectional (Schuster & Paliwal 1997): each layer also runs a reverse direction over the
// sequence from its last step to its first, with its own parameters (suffix `_reverse`); the
// layer's output is [forward; reverse] at every step (2H features), the next layer's input.
// States are (num_layers * 2, B, H), ordered layer 0 forward, layer 0 reverse, layer 1 ...
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "nabla/core/generator.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

// torch.nn.GRU's / torch.nn.LSTM's keyword arguments, in their order, then the dtype.
struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;    // input and output (B, T, *) instead of (T, B, *)
  double dropout = 0;          // on each layer's output but the last, in training
  bool bidirectional = false;  // output (T, B, 2H), states (2 * num_layers, B, H)
  DType dtype = kFloat32;
};

class RNNBase : public Module {
 public:
  // Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's initialisation).
  void reset_parameters(Generator& gen = default_generator());
  void set_generator(Generator& gen) { gen_ = &gen; }  // for the dropout masks

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  int64_t num_layers() const { return options_.num_layers; }
  int64_t num_directions() const { return options_.bidirectional ? 2 : 1; }
  bool bidirectional() const { return options_.bidirectional; }
  const RNNOptions& options() const { return options_; }

 protected:
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh;  // b_* undefined without bias
  };
  // gates: how many H-row blocks W_ih and W_hh stack (GRU 3, LSTM 4).
  RNNBase(const char* type, int64_t input_size, int64_t hidden_size, int64_t gates,
          const RNNOptions& options);

  // One step of one direction: gi = W_ih x_t + b_ih (B, gates*H), the state (GRU {h}, LSTM
  // {h, c}), each (B, H) -> the new state; its first tensor is the step's output.
  using Cell = std::function<std::vector<Tensor>(const Tensor& gi, const std::vector<Tensor>& state,
                                                 const Weights& w)>;
  struct Result {
    Tensor output;              // as the input's layout: (T, B, D*H), (B, T, D*H) or (T, D*H)
    std::vector<Tensor> final;  // per state tensor: (L*D, B, H), or (L*D, H) unbatched
  };
  // Checks x and the initial states (named by state_names, undefined = zeros), then runs.
  Result run(const Tensor& x, const std::vector<Tensor>& init,
             const std::vector<const char*>& state_names, const Cell& cell) const;

 private:
  int64_t input_size_, hidden_size_;
  RNNOptions options_;
  std::vector<Weights> weights_;  // layer-major: [l * D + d]
  Generator* gen_;
};

}  // namespace nabla::nn
