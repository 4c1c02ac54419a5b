// nn::GRU: a multi-layer gated recurrent unit with torch.nn.GRU's parameters, names, shapes,
// initialisation and gate order, so weights load both ways. For layer l and time step t:
//   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
//   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
//   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
//   h' = (1 - z) * n + z * h
// The input projections W_i* x + b_i* of all time steps are one linear call per layer; only the
// hidden projection runs inside the time loop. Not bidirectional.
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/core/generator.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

struct GRUOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // input and output (B, T, *) instead of (T, B, *)
  double dropout = 0;        // on each layer's output but the last, in training
  DType dtype = kFloat32;
};

class GRU : public Module {
 public:
  struct Output {
    Tensor output;  // (T, B, H), or (B, T, H) if batch_first; (T, H) for an unbatched input
    Tensor h_n;     // (num_layers, B, H); (num_layers, H) for an unbatched input
    friend std::vector<Tensor*> module_outputs(Output& o) { return {&o.output, &o.h_n}; }
  };

  // Parameters per layer l: weight_ih_l{l} (3H, in), weight_hh_l{l} (3H, H), bias_ih_l{l} (3H),
  // bias_hh_l{l} (3H); rows in gate order r, z, n; all ~ U(-1/sqrt(H), 1/sqrt(H)).
  GRU(int64_t input_size, int64_t hidden_size, const GRUOptions& options = {});
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias = true,
      bool batch_first = false, double dropout = 0, DType dtype = kFloat32)
      : GRU(input_size, hidden_size, GRUOptions{num_layers, bias, batch_first, dropout, dtype}) {}

  // x (T, B, input_size) (or (B, T, input_size) if batch_first, or unbatched (T, input_size));
  // h0 (num_layers, B, H) or (num_layers, H) unbatched, zeros if undefined.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor()) const;
  Output operator()(const Tensor& x, const Tensor& h0 = Tensor()) const {
    return call(&GRU::forward, x, h0);
  }

  // Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)).
  void reset_parameters(Generator& gen = default_generator());
  void set_generator(Generator& gen) { gen_ = &gen; }  // for the dropout masks

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  int64_t num_layers() const { return options_.num_layers; }
  const GRUOptions& options() const { return options_; }

 private:
  struct Layer {
    Tensor w_ih, w_hh, b_ih, b_hh;  // b_* undefined without bias
  };
  int64_t input_size_, hidden_size_;
  GRUOptions options_;
  std::vector<Layer> layers_;
  Generator* gen_;
};

// One GRU step for a batch: gi = W_ih x + b_ih (B, 3H) precomputed, h (B, H) -> h' (B, H).
Tensor gru_cell(const Tensor& gi, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh);

}  // namespace nabla::nn
