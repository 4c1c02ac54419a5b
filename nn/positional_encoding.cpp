// Sinusoidal and learned positional encodings.
#include "nabla/nn/positional_encoding.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/ops/arithmetic.h"

namespace nabla::nn {
namespace {

// Validates x (B, T, d) against a table of max_len positions of width d.
void check_input(const char* op, const Tensor& x, int64_t d, int64_t max_len, DType dt) {
  if (x.dim() != 3 || x.size(2) != d)
    throw ShapeError(fmt::format("{}: expected input (batch, T <= {}, {}), got {}", op, max_len, d,
                                 shape_str(x.shape())));
  if (x.size(1) > max_len)
    throw ShapeError(fmt::format(
        "{}: input {} has {} positions but the table holds max_len = {}; construct the module "
        "with a larger max_len",
        op, shape_str(x.shape()), x.size(1), max_len));
  if (x.dtype() != dt)
    throw DTypeError(fmt::format(
        "{}: input dtype {} differs from the table's dtype {}; convert the module with .to({})", op,
        dtype_name(x.dtype()), dtype_name(dt), x.dtype() == kFloat64 ? "kFloat64" : "kFloat32"));
}

void check_sizes(const char* op, int64_t d, int64_t max_len) {
  if (d <= 0 || max_len <= 0)
    throw ValueError(
        fmt::format("{}: d_model ({}) and max_len ({}) must be positive", op, d, max_len));
}

}  // namespace

Tensor sinusoidal_table(int64_t max_len, int64_t d, DType dt) {
  check_sizes("sinusoidal_table", d, max_len);
  std::vector<double> p(static_cast<size_t>(max_len * d));
  for (int64_t pos = 0; pos < max_len; ++pos)
    for (int64_t j = 0; j < d; ++j) {
      // columns 2i and 2i+1 share the frequency 1 / 10000^(2i/d)
      const double angle =
          static_cast<double>(pos) /
          std::pow(10000.0, static_cast<double>(j - j % 2) / static_cast<double>(d));
      p[static_cast<size_t>(pos * d + j)] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  return from_vector(p, {max_len, d}).to(dt);
}

PositionalEncoding::PositionalEncoding(int64_t d_model, double dropout, int64_t max_len)
    : Module("PositionalEncoding"), d_model_(d_model), max_len_(max_len) {
  check_sizes("PositionalEncoding", d_model, max_len);
  P_ = register_buffer("P", sinusoidal_table(max_len, d_model).unsqueeze(0),
                       /*persistent=*/false);
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout));
}

Tensor PositionalEncoding::forward(const Tensor& x) const {
  check_input("PositionalEncoding", x, d_model_, max_len_, P_.dtype());
  return (*dropout_)(add(x, P_.narrow(1, 0, x.size(1))));
}

LearnedPositionalEncoding::LearnedPositionalEncoding(int64_t d_model, double dropout,
                                                     int64_t max_len)
    : Module("LearnedPositionalEncoding"), d_model_(d_model), max_len_(max_len) {
  check_sizes("LearnedPositionalEncoding", d_model, max_len);
  weight_ = register_parameter("weight", zeros({1, max_len, d_model}));
  init::trunc_normal_(weight_, 0.0, 0.02);
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout));
}

Tensor LearnedPositionalEncoding::forward(const Tensor& x) const {
  check_input("LearnedPositionalEncoding", x, d_model_, max_len_, weight_.dtype());
  return (*dropout_)(add(x, weight_.narrow(1, 0, x.size(1))));
}

}  // namespace nabla::nn
