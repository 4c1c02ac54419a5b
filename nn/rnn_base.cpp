// nn::RNNBase: parameters, checks and the layer / direction / time loop of GRU and LSTM, over
// differentiable ops (so double backward works).
#include "nabla/nn/rnn_base.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/ops/dropout.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/shape.h"

namespace nabla::nn {

RNNBase::RNNBase(const char* type, int64_t input_size, int64_t hidden_size, int64_t gates,
                 const RNNOptions& options)
    : Module(type),
      input_size_(input_size),
      hidden_size_(hidden_size),
      options_(options),
      gen_(&default_generator()) {
  if (input_size < 1 || hidden_size < 1 || options.num_layers < 1)
    throw ValueError(
        fmt::format("{}: input_size, hidden_size and num_layers must be >= 1, got {}, {} and {}",
                    type, input_size, hidden_size, options.num_layers));
  if (options.dropout < 0 || options.dropout > 1)
    throw ValueError(fmt::format("{}: dropout must be in [0, 1], got {}", type, options.dropout));
  if (!is_floating(options.dtype))
    throw DTypeError(
        fmt::format("{}: dtype must be floating, got {}", type, dtype_name(options.dtype)));
  const int64_t G = gates * hidden_size, D = num_directions();
  for (int64_t l = 0; l < options.num_layers; ++l) {
    const int64_t in = l == 0 ? input_size : D * hidden_size;
    for (int64_t d = 0; d < D; ++d) {
      const std::string s = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      Weights w;
      w.w_ih = register_parameter("weight_ih" + s, empty({G, in}, options.dtype));
      w.w_hh = register_parameter("weight_hh" + s, empty({G, hidden_size}, options.dtype));
      if (options.bias) {
        w.b_ih = register_parameter("bias_ih" + s, empty({G}, options.dtype));
        w.b_hh = register_parameter("bias_hh" + s, empty({G}, options.dtype));
      }
      weights_.push_back(w);
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters(Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size_));
  for (const Tensor& p : parameters(false)) init::uniform_(p, -bound, bound, gen);
}

RNNBase::Result RNNBase::run(const Tensor& x_in, const std::vector<Tensor>& init,
                             const std::vector<const char*>& state_names, const Cell& cell) const {
  const std::string& who = name();
  const int64_t H = hidden_size_, L = options_.num_layers, D = num_directions();
  const bool unbatched = x_in.dim() == 2;
  if ((x_in.dim() != 3 && !unbatched) || x_in.size(-1) != input_size_)
    throw ShapeError(fmt::format("{}: expected input ({}, {}) or (T, {}), got {}", who,
                                 options_.batch_first ? "B, T" : "T, B", input_size_, input_size_,
                                 shape_str(x_in.shape())));
  const DType dt = weights_[0].w_ih.dtype();
  if (x_in.dtype() != dt)
    throw DTypeError(fmt::format("{}: input dtype {} differs from the parameters' dtype {}", who,
                                 dtype_name(x_in.dtype()), dtype_name(dt)));
  // x (T, B, in), time-major from here on
  Tensor x = unbatched ? x_in.unsqueeze(1) : options_.batch_first ? x_in.transpose(0, 1) : x_in;
  const int64_t T = x.size(0), B = x.size(1);
  if (T == 0)
    throw ShapeError(
        fmt::format("{}: the input {} has no time steps", who, shape_str(x_in.shape())));
  std::vector<Tensor> states(init.size());  // each (L*D, B, H) or undefined
  for (size_t k = 0; k < init.size(); ++k) {
    if (!init[k].defined()) continue;
    const Shape want = unbatched ? Shape{L * D, H} : Shape{L * D, B, H};
    if (init[k].shape() != want)
      throw ShapeError(fmt::format("{}: expected {} {} for input {}, got {}", who, state_names[k],
                                   shape_str(want), shape_str(x_in.shape()),
                                   shape_str(init[k].shape())));
    if (init[k].dtype() != dt)
      throw DTypeError(fmt::format("{}: {} dtype {} differs from the input's dtype {}", who,
                                   state_names[k], dtype_name(init[k].dtype()), dtype_name(dt)));
    states[k] = unbatched ? init[k].unsqueeze(1) : init[k];  // (L*D, B, H)
  }

  std::vector<std::vector<Tensor>> finals(init.size());  // [k][l * D + d]
  Tensor layer_in = x;                                   // (T, B, in)
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> dir_outputs;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t slot = l * D + d;
      const Weights& w = weights_[static_cast<size_t>(slot)];
      Tensor gi = linear(layer_in, w.w_ih, w.b_ih);  // (T, B, G*H): every step in one GEMM
      std::vector<Tensor> state;
      for (const Tensor& s : states)
        state.push_back(s.defined() ? s.select(0, slot) : zeros({B, H}, dt));
      std::vector<Tensor> hs(static_cast<size_t>(T));
      for (int64_t i = 0; i < T; ++i) {
        const int64_t t = d == 0 ? i : T - 1 - i;  // the reverse direction runs backwards
        state = cell(gi.select(0, t), state, w);
        hs[static_cast<size_t>(t)] = state[0];
      }
      for (size_t k = 0; k < state.size(); ++k) finals[k].push_back(state[k]);
      dir_outputs.push_back(stack(hs, 0));  // (T, B, H)
    }
    layer_in = D == 1 ? dir_outputs[0] : cat(dir_outputs, -1);  // (T, B, D*H)
    if (l + 1 < L && options_.dropout > 0)
      layer_in = dropout(layer_in, options_.dropout, is_training(), *gen_);
  }
  Result r;
  for (const auto& f : finals) r.final.push_back(stack(f, 0));  // (L*D, B, H)
  if (unbatched) {
    r.output = layer_in.squeeze(1);
    for (Tensor& f : r.final) f = f.squeeze(1);
  } else {
    r.output = options_.batch_first ? layer_in.transpose(0, 1) : layer_in;
  }
  return r;
}

}  // namespace nabla::nn
