// nn::init: PyTorch's parameter initialisation schemes. Each fills a tensor in place (the handle
// shares storage with the caller's tensor) under NoGradGuard and returns it. Random schemes draw
// from `gen` (the default generator if none is given).
#pragma once
#include <cstdint>
#include <optional>

#include "nabla/core/generator.h"
#include "nabla/core/tensor.h"

namespace nabla::nn::init {

enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };
enum class FanMode { FanIn, FanOut };

// torch.nn.init.calculate_gain: the recommended gain for a nonlinearity (param is LeakyReLU's
// negative slope, default 0.01).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

struct Fans {
  int64_t fan_in;   // size(1) * receptive field
  int64_t fan_out;  // size(0) * receptive field
};
// Fans of a weight of shape (out, in, *kernel); needs at least 2 dims.
Fans calculate_fan_in_and_fan_out(const Tensor& t);

// U(a, b).
Tensor uniform_(Tensor t, double a = 0.0, double b = 1.0, Generator& gen = default_generator());
// N(mean, stddev^2).
Tensor normal_(Tensor t, double mean = 0.0, double stddev = 1.0,
               Generator& gen = default_generator());
// N(mean, stddev^2) truncated to [a, b] (inverse-CDF sampling, as PyTorch: exact in the tails).
Tensor trunc_normal_(Tensor t, double mean = 0.0, double stddev = 1.0, double a = -2.0,
                     double b = 2.0, Generator& gen = default_generator());
// Fills with a value, 0 or 1.
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
// Glorot: U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1.0, Generator& gen = default_generator());
// Glorot: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor t, double gain = 1.0, Generator& gen = default_generator());
// He: U(-bound, bound), bound = gain(nonlinearity, a) * sqrt(3 / fan(mode)).
Tensor kaiming_uniform_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                        Generator& gen = default_generator());
// He: N(0, std^2), std = gain(nonlinearity, a) / sqrt(fan(mode)).
Tensor kaiming_normal_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                       Generator& gen = default_generator());

}  // namespace nabla::nn::init
