// Pooling modules over the pooling ops (ops/pool.h), as torch.nn: MaxPool1d/2d, AvgPool1d/2d,
// AdaptiveAvgPool1d/2d. No parameters. The kernel size comes first, the rest in an options
// struct: nn::MaxPool2d pool(3, {.stride = 2, .padding = 1}). A stride left unset is the kernel
// size. PyTorch's return_indices=True is forward_with_indices.
#pragma once
#include <cstdint>
#include <optional>

#include "nabla/nn/module.h"
#include "nabla/ops/pool.h"
#include "nabla/ops/window_args.h"

namespace nabla::nn {

struct MaxPool2dOptions {
  Size2 stride{};  // unset: kernel_size
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};

struct MaxPool1dOptions {
  std::optional<int64_t> stride;  // unset: kernel_size
  int64_t padding = 0;
  int64_t dilation = 1;
  bool ceil_mode = false;
};

struct AvgPool2dOptions {
  Size2 stride{};  // unset: kernel_size
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

struct AvgPool1dOptions {
  std::optional<int64_t> stride;  // unset: kernel_size
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, const MaxPool2dOptions& options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&MaxPool2d::forward, x); }
  MaxPoolResult forward_with_indices(const Tensor& x) const;  // no hooks run
  Size2 kernel_size() const { return kernel_size_; }
  const MaxPool2dOptions& options() const { return options_; }

 private:
  Size2 kernel_size_;
  MaxPool2dOptions options_;
};

class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(int64_t kernel_size, const MaxPool1dOptions& options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&MaxPool1d::forward, x); }
  MaxPoolResult forward_with_indices(const Tensor& x) const;  // no hooks run
  int64_t kernel_size() const { return kernel_size_; }
  const MaxPool1dOptions& options() const { return options_; }

 private:
  int64_t kernel_size_;
  MaxPool1dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, const AvgPool2dOptions& options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&AvgPool2d::forward, x); }
  Size2 kernel_size() const { return kernel_size_; }
  const AvgPool2dOptions& options() const { return options_; }

 private:
  Size2 kernel_size_;
  AvgPool2dOptions options_;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(int64_t kernel_size, const AvgPool1dOptions& options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&AvgPool1d::forward, x); }
  int64_t kernel_size() const { return kernel_size_; }
  const AvgPool1dOptions& options() const { return options_; }

 private:
  int64_t kernel_size_;
  AvgPool1dOptions options_;
};

// (.., H, W) -> (.., output_size): means over windows that tile the input.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& x) const { return adaptive_avg_pool2d(x, output_size_); }
  Tensor operator()(const Tensor& x) const { return call(&AdaptiveAvgPool2d::forward, x); }
  Size2 output_size() const { return output_size_; }

 private:
  Size2 output_size_;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size);
  Tensor forward(const Tensor& x) const { return adaptive_avg_pool1d(x, output_size_); }
  Tensor operator()(const Tensor& x) const { return call(&AdaptiveAvgPool1d::forward, x); }
  int64_t output_size() const { return output_size_; }

 private:
  int64_t output_size_;
};

}  // namespace nabla::nn
