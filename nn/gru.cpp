// nn::GRU over differentiable ops: one linear per layer for the input projections of every time
// step, then a loop of gru_cell over time. The graph is ordinary ops, so double backward works.
#include "nabla/nn/gru.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/dropout.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/shape.h"
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
    : Module("GRU"),
      input_size_(input_size),
      hidden_size_(hidden_size),
      options_(options),
      gen_(&default_generator()) {
  if (input_size < 1 || hidden_size < 1 || options.num_layers < 1)
    throw ValueError(
        fmt::format("GRU: input_size, hidden_size and num_layers must be >= 1, got {}, {} and {}",
                    input_size, hidden_size, options.num_layers));
  if (options.dropout < 0 || options.dropout > 1)
    throw ValueError(fmt::format("GRU: dropout must be in [0, 1], got {}", options.dropout));
  if (!is_floating(options.dtype))
    throw DTypeError(fmt::format("GRU: dtype must be floating, got {}", dtype_name(options.dtype)));
  const int64_t G = 3 * hidden_size;  // gates r, z, n stacked
  for (int64_t l = 0; l < options.num_layers; ++l) {
    const int64_t in = l == 0 ? input_size : hidden_size;
    const std::string s = "_l" + std::to_string(l);
    Layer layer;
    layer.w_ih = register_parameter("weight_ih" + s, empty({G, in}, options.dtype));
    layer.w_hh = register_parameter("weight_hh" + s, empty({G, hidden_size}, options.dtype));
    if (options.bias) {
      layer.b_ih = register_parameter("bias_ih" + s, empty({G}, options.dtype));
      layer.b_hh = register_parameter("bias_hh" + s, empty({G}, options.dtype));
    }
    layers_.push_back(layer);
  }
  reset_parameters();
}

void GRU::reset_parameters(Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size_));
  for (const Tensor& p : parameters(false)) init::uniform_(p, -bound, bound, gen);
}

GRU::Output GRU::forward(const Tensor& x_in, const Tensor& h0_in) const {
  const int64_t H = hidden_size_, L = options_.num_layers;
  const bool unbatched = x_in.dim() == 2;
  if ((x_in.dim() != 3 && !unbatched) || x_in.size(-1) != input_size_)
    throw ShapeError(fmt::format("GRU: expected input ({}, {}) or (T, {}), got {}",
                                 options_.batch_first ? "B, T" : "T, B", input_size_, input_size_,
                                 shape_str(x_in.shape())));
  if (x_in.dtype() != layers_[0].w_ih.dtype())
    throw DTypeError(fmt::format("GRU: input dtype {} differs from the parameters' dtype {}",
                                 dtype_name(x_in.dtype()), dtype_name(layers_[0].w_ih.dtype())));
  // x (T, B, in), time-major from here on
  Tensor x = unbatched ? x_in.unsqueeze(1) : options_.batch_first ? x_in.transpose(0, 1) : x_in;
  const int64_t T = x.size(0), B = x.size(1);
  if (T == 0)
    throw ShapeError(fmt::format("GRU: the input {} has no time steps", shape_str(x_in.shape())));
  Tensor h0 = h0_in;
  if (h0.defined()) {
    const Shape want = unbatched ? Shape{L, H} : Shape{L, B, H};
    if (h0.shape() != want)
      throw ShapeError(fmt::format("GRU: expected h0 {} for input {}, got {}", shape_str(want),
                                   shape_str(x_in.shape()), shape_str(h0.shape())));
    if (h0.dtype() != x.dtype())
      throw DTypeError(fmt::format("GRU: h0 dtype {} differs from the input's dtype {}",
                                   dtype_name(h0.dtype()), dtype_name(x.dtype())));
    if (unbatched) h0 = h0.unsqueeze(1);  // (L, 1, H)
  }

  std::vector<Tensor> h_n;
  Tensor layer_in = x;  // (T, B, in)
  for (int64_t l = 0; l < L; ++l) {
    const Layer& p = layers_[static_cast<size_t>(l)];
    Tensor gi = linear(layer_in, p.w_ih, p.b_ih);  // (T, B, 3H): every step in one GEMM
    Tensor h = h0.defined() ? h0.select(0, l) : zeros({B, H}, x.dtype());
    std::vector<Tensor> hs;
    hs.reserve(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      h = gru_cell(gi.select(0, t), h, p.w_hh, p.b_hh);
      hs.push_back(h);
    }
    h_n.push_back(h);
    layer_in = stack(hs, 0);  // (T, B, H)
    if (l + 1 < L && options_.dropout > 0)
      layer_in = dropout(layer_in, options_.dropout, is_training(), *gen_);
  }
  Tensor out = layer_in, hn = stack(h_n, 0);  // (T, B, H), (L, B, H)
  if (unbatched) return {out.squeeze(1), hn.squeeze(1)};
  if (options_.batch_first) out = out.transpose(0, 1);
  return {out, hn};
}

}  // namespace nabla::nn
