// nn::Conv1d and nn::Conv2d over the conv ops (ops/conv.h).
#include "nabla/nn/conv.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/ops/conv.h"

namespace nabla::nn {
namespace {

// The checks PyTorch's _ConvNd makes at construction; errors name the module.
void check_arguments(const char* module, int64_t in, int64_t out, int64_t groups,
                     const std::string& padding_mode, bool strided, DType dtype) {
  if (in < 0 || out < 0)
    throw ValueError(fmt::format("{}: in_channels and out_channels must be >= 0, got {} and {}",
                                 module, in, out));
  if (groups <= 0 || in % groups != 0 || out % groups != 0)
    throw ValueError(fmt::format(
        "{}: groups must be positive and divide in_channels and out_channels, got groups={}, "
        "in_channels={}, out_channels={}",
        module, groups, in, out));
  if (!padding_mode.empty() && padding_mode != "same" && padding_mode != "valid")
    throw ValueError(fmt::format("{}: padding must be sizes, \"same\" or \"valid\", got \"{}\"",
                                 module, padding_mode));
  if (padding_mode == "same" && strided)
    throw ValueError(fmt::format("{}: padding=\"same\" needs stride 1", module));
  if (!is_floating(dtype))
    throw DTypeError(fmt::format("{}: dtype must be floating, got {}", module, dtype_name(dtype)));
}

// weight ~ kaiming_uniform_(a = sqrt(5)), bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void init_conv(Tensor& weight, Tensor& bias, Generator& gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn,
                         init::Nonlinearity::LeakyReLU, gen);
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

// x must be (B, in, *spatial) or (in, *spatial) in the weight's dtype.
void check_input(const char* module, const Tensor& x, int64_t spatial, int64_t in,
                 const Tensor& weight) {
  const bool rank_ok = x.dim() == spatial + 1 || x.dim() == spatial + 2;
  if (!rank_ok || x.size(x.dim() - spatial - 1) != in)
    throw ShapeError(
        fmt::format("{}: expects input {} with in_channels = {} channels, got shape {}", module,
                    spatial == 2 ? "(B, C, H, W) or (C, H, W)" : "(B, C, L) or (C, L)", in,
                    shape_str(x.shape())));
  if (x.dtype() != weight.dtype())
    throw DTypeError(fmt::format("{}: input dtype {} differs from the weight's dtype {}", module,
                                 dtype_name(x.dtype()), dtype_name(weight.dtype())));
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
               const Conv2dOptions& options)
    : Module("Conv2d"), in_channels_(in_channels), out_channels_(out_channels), options_(options) {
  check_arguments("Conv2d", in_channels, out_channels, options.groups, options.padding.mode,
                  options.stride[0] != 1 || options.stride[1] != 1, options.dtype);
  if (kernel_size[0] <= 0 || kernel_size[1] <= 0)
    throw ValueError(fmt::format("Conv2d: kernel_size must be positive, got ({}, {})",
                                 kernel_size[0], kernel_size[1]));
  weight_ = register_parameter(
      "weight", empty({out_channels, in_channels / options.groups, kernel_size[0], kernel_size[1]},
                      options.dtype));
  if (options.bias) bias_ = register_parameter("bias", empty({out_channels}, options.dtype));
  reset_parameters();
}

void Conv2d::reset_parameters(Generator& gen) { init_conv(weight_, bias_, gen); }

Tensor Conv2d::forward(const Tensor& x) const {
  check_input("Conv2d", x, 2, in_channels_, weight_);
  const Conv2dOptions& o = options_;
  return conv2d(x, weight_, bias_, o.stride, o.padding, o.dilation, o.groups);
}

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
               const Conv1dOptions& options)
    : Module("Conv1d"), in_channels_(in_channels), out_channels_(out_channels), options_(options) {
  check_arguments("Conv1d", in_channels, out_channels, options.groups, options.padding.mode,
                  options.stride != 1, options.dtype);
  if (kernel_size <= 0)
    throw ValueError(fmt::format("Conv1d: kernel_size must be positive, got {}", kernel_size));
  weight_ = register_parameter(
      "weight", empty({out_channels, in_channels / options.groups, kernel_size}, options.dtype));
  if (options.bias) bias_ = register_parameter("bias", empty({out_channels}, options.dtype));
  reset_parameters();
}

void Conv1d::reset_parameters(Generator& gen) { init_conv(weight_, bias_, gen); }

Tensor Conv1d::forward(const Tensor& x) const {
  check_input("Conv1d", x, 1, in_channels_, weight_);
  const Conv1dOptions& o = options_;
  return conv1d(x, weight_, bias_, o.stride, o.padding, o.dilation, o.groups);
}

}  // namespace nabla::nn
