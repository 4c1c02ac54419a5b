// Pooling modules: each forwards to its op (ops/pool.h), which checks the arguments against the
// input and names itself in the errors, as PyTorch's modules do.
#include "nabla/nn/pool.h"

namespace nabla::nn {

MaxPool2d::MaxPool2d(Size2 kernel_size, const MaxPool2dOptions& options)
    : Module("MaxPool2d"), kernel_size_(kernel_size), options_(options) {}

Tensor MaxPool2d::forward(const Tensor& x) const {
  const MaxPool2dOptions& o = options_;
  return max_pool2d(x, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
}

MaxPoolResult MaxPool2d::forward_with_indices(const Tensor& x) const {
  ScopeEntry scope = enter_scope();
  const MaxPool2dOptions& o = options_;
  return max_pool2d_with_indices(x, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
}

MaxPool1d::MaxPool1d(int64_t kernel_size, const MaxPool1dOptions& options)
    : Module("MaxPool1d"), kernel_size_(kernel_size), options_(options) {}

Tensor MaxPool1d::forward(const Tensor& x) const {
  const MaxPool1dOptions& o = options_;
  return max_pool1d(x, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
}

MaxPoolResult MaxPool1d::forward_with_indices(const Tensor& x) const {
  ScopeEntry scope = enter_scope();
  const MaxPool1dOptions& o = options_;
  return max_pool1d_with_indices(x, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 kernel_size, const AvgPool2dOptions& options)
    : Module("AvgPool2d"), kernel_size_(kernel_size), options_(options) {}

Tensor AvgPool2d::forward(const Tensor& x) const {
  const AvgPool2dOptions& o = options_;
  return avg_pool2d(x, kernel_size_, o.stride, o.padding, o.ceil_mode, o.count_include_pad);
}

AvgPool1d::AvgPool1d(int64_t kernel_size, const AvgPool1dOptions& options)
    : Module("AvgPool1d"), kernel_size_(kernel_size), options_(options) {}

Tensor AvgPool1d::forward(const Tensor& x) const {
  const AvgPool1dOptions& o = options_;
  return avg_pool1d(x, kernel_size_, o.stride, o.padding, o.ceil_mode, o.count_include_pad);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size)
    : Module("AdaptiveAvgPool2d"), output_size_(output_size) {}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(int64_t output_size)
    : Module("AdaptiveAvgPool1d"), output_size_(output_size) {}

}  // namespace nabla::nn
