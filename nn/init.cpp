// nn::init: the formulas follow torch.nn.init (fans, gains, bounds). Random values are drawn in
// float64 from the generator, transformed, and stored in the tensor's dtype.
#include "nabla/nn/init.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/parallel.h"

namespace nabla::nn::init {

namespace {

void check_floating(const char* op, const Tensor& t) {
  if (!t.defined()) throw ValueError(fmt::format("{}: undefined tensor", op));
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format("{}: expected a floating tensor, got {} of shape {}", op,
                                 dtype_name(t.dtype()), shape_str(t.shape())));
}

// Draws a float64 sample per element (uniform [0, 1) or standard normal) from the generator's
// counters, maps it through f and stores it in t's dtype. Element i uses counter base + i, as
// rand/randn do, so the values are those of drawing a float64 tensor and copying it; float32 and
// float64 tensors are written directly, because that float64 tensor (twice a float32
// parameter's size) stayed in the allocator's cache and later requests were served from it.
template <class F>
Tensor fill_random(const char* op, Tensor t, Generator& gen, bool normal, F f) {
  check_floating(op, t);
  NoGradGuard no_grad;
  const DType dt = t.dtype();
  if (dt != kFloat32 && dt != kFloat64) {
    Tensor draw = normal ? randn(t.shape(), gen, kFloat64) : rand(t.shape(), gen, kFloat64);
    double* p = draw.data_ptr<double>();
    for (int64_t i = 0; i < draw.numel(); ++i) p[i] = f(p[i]);
    t.copy_(draw);
    return t;
  }
  const bool direct = t.is_contiguous();
  Tensor out = direct ? t : empty(t.shape(), dt);
  const uint64_t base = gen.advance(static_cast<uint64_t>(out.numel()));
  auto sample = [&](int64_t i) {
    const uint64_t c = base + static_cast<uint64_t>(i);
    return f(normal ? gen.normal(c) : gen.uniform(c));
  };
  if (dt == kFloat32) {
    float* p = out.data_ptr<float>();
    parallel_for(out.numel(), 40, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = static_cast<float>(sample(i));
    });
  } else {
    double* p = out.data_ptr<double>();
    parallel_for(out.numel(), 40, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = sample(i);
    });
  }
  if (!direct) t.copy_(out);
  return t;
}

// Inverse error function: Giles' single-precision approximation ("Approximating the erfinv
// function", 2010) refined by two Newton steps on std::erf to full double precision.
double erfinv(double y) {
  if (y <= -1.0) return -INFINITY;
  if (y >= 1.0) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  const double two_over_sqrt_pi = 2.0 / std::sqrt(std::numbers::pi);
  for (int it = 0; it < 2; ++it) x -= (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}

Fans fans_of(const char* op, const Tensor& t) {
  if (t.dim() < 2)
    throw ShapeError(fmt::format("{}: fan in and fan out need at least 2 dims, got shape {}", op,
                                 shape_str(t.shape())));
  int64_t receptive = 1;  // product of the kernel dims of a conv weight (out, in, *kernel)
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double fan_for(const char* op, const Tensor& t, FanMode mode) {
  Fans f = fans_of(op, t);
  return static_cast<double>(mode == FanMode::FanIn ? f.fan_in : f.fan_out);
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::SELU:
      return 3.0 / 4.0;
  }
  throw ValueError("calculate_gain: unknown nonlinearity");
}

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  return fans_of("calculate_fan_in_and_fan_out", t);
}

Tensor uniform_(Tensor t, double a, double b, Generator& gen) {
  if (!(a <= b)) throw ValueError(fmt::format("uniform_: expected a <= b, got a={} b={}", a, b));
  return fill_random("uniform_", t, gen, false, [=](double u) { return a + (b - a) * u; });
}

Tensor normal_(Tensor t, double mean, double stddev, Generator& gen) {
  if (!(stddev >= 0)) throw ValueError(fmt::format("normal_: stddev must be >= 0, got {}", stddev));
  return fill_random("normal_", t, gen, true, [=](double z) { return mean + stddev * z; });
}

// As torch.nn.init.trunc_normal_: u ~ U(2 cdf(a) - 1, 2 cdf(b) - 1), x = mean + std sqrt(2)
// erfinv(u), clamped to [a, b] against rounding.
Tensor trunc_normal_(Tensor t, double mean, double stddev, double a, double b, Generator& gen) {
  if (!(stddev > 0))
    throw ValueError(fmt::format("trunc_normal_: stddev must be > 0, got {}", stddev));
  if (!(a < b)) throw ValueError(fmt::format("trunc_normal_: expected a < b, got a={} b={}", a, b));
  auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = 2 * norm_cdf((a - mean) / stddev) - 1;
  const double hi = 2 * norm_cdf((b - mean) / stddev) - 1;
  return fill_random("trunc_normal_", t, gen, false, [=](double u) {
    const double x = mean + stddev * std::sqrt(2.0) * erfinv(lo + (hi - lo) * u);
    return std::clamp(x, a, b);
  });
}

Tensor constant_(Tensor t, double value) {
  check_floating("constant_", t);
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

Tensor xavier_uniform_(Tensor t, double gain, Generator& gen) {
  check_floating("xavier_uniform_", t);
  Fans f = fans_of("xavier_uniform_", t);
  const double stddev = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  const double bound = std::sqrt(3.0) * stddev;
  return uniform_(std::move(t), -bound, bound, gen);
}

Tensor xavier_normal_(Tensor t, double gain, Generator& gen) {
  check_floating("xavier_normal_", t);
  Fans f = fans_of("xavier_normal_", t);
  const double stddev = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  return normal_(std::move(t), 0.0, stddev, gen);
}

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity,
                        Generator& gen) {
  check_floating("kaiming_uniform_", t);
  if (t.numel() == 0) return t;  // as PyTorch: nothing to initialise (and the fan may be 0)
  const double stddev =
      calculate_gain(nonlinearity, a) / std::sqrt(fan_for("kaiming_uniform_", t, mode));
  const double bound = std::sqrt(3.0) * stddev;
  return uniform_(std::move(t), -bound, bound, gen);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity,
                       Generator& gen) {
  check_floating("kaiming_normal_", t);
  if (t.numel() == 0) return t;
  const double stddev =
      calculate_gain(nonlinearity, a) / std::sqrt(fan_for("kaiming_normal_", t, mode));
  return normal_(std::move(t), 0.0, stddev, gen);
}

}  // namespace nabla::nn::init
