// nn::Conv1d and nn::Conv2d: torch.nn.Conv1d / Conv2d with PyTorch's parameter names and shapes
// (weight (out, in/groups, *kernel), bias (out)) and default initialisation, so state dicts move
// both ways. The arguments after the kernel size are an options struct:
//   nn::Conv2d conv(3, 16, 3, {.padding = 1});
//   nn::Conv2d depthwise(16, 16, 3, {.padding = "same", .groups = 16, .bias = false});
#pragma once
#include <cstdint>

#include "nabla/core/generator.h"
#include "nabla/nn/module.h"
#include "nabla/ops/window_args.h"

namespace nabla::nn {

struct Conv2dOptions {
  Size2 stride = 1;
  ConvPadding<2> padding = 0;  // sizes, "same" (stride 1 only) or "valid"
  Size2 dilation = 1;
  int64_t groups = 1;  // in_channels and out_channels must be multiples of it
  bool bias = true;
  DType dtype = kFloat32;
};

struct Conv1dOptions {
  int64_t stride = 1;
  ConvPadding<1> padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  DType dtype = kFloat32;
};

// y = conv2d(x, weight, bias, stride, padding, dilation, groups) (ops/conv.h).
class Conv2d : public Module {
 public:
  // weight ~ kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)), bias ~ the same
  // uniform, fan_in = in_channels / groups * kh * kw.
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
         const Conv2dOptions& options = {});

  // x (B, in_channels, H, W) or (in_channels, H, W) -> (B, out_channels, OH, OW) or without B.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Conv2d::forward, x); }
  void reset_parameters(Generator& gen = default_generator());

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const Conv2dOptions& options() const { return options_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  int64_t in_channels_, out_channels_;
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

// y = conv1d(x, weight, bias, stride, padding, dilation, groups) (ops/conv.h).
class Conv1d : public Module {
 public:
  // Initialised as Conv2d, fan_in = in_channels / groups * kernel_size.
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
         const Conv1dOptions& options = {});

  // x (B, in_channels, L) or (in_channels, L) -> (B, out_channels, OL) or without B.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Conv1d::forward, x); }
  void reset_parameters(Generator& gen = default_generator());

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const Conv1dOptions& options() const { return options_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t in_channels_, out_channels_;
  Conv1dOptions options_;
  Tensor weight_, bias_;
};

}  // namespace nabla::nn
