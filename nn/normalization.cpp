#include "nabla/nn/normalization.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/ops/norms.h"

namespace nabla::nn {

BatchNormBase::BatchNormBase(std::string type_name, int64_t num_features,
                             const BatchNormOptions& options)
    : Module(std::move(type_name)), num_features_(num_features), options_(options) {
  if (num_features <= 0)
    throw ValueError(
        fmt::format("{}: num_features must be positive, got {}", name(), num_features));
  if (options.affine) {
    weight_ = register_parameter("weight", ones({num_features}, options.dtype));
    bias_ = register_parameter("bias", zeros({num_features}, options.dtype));
  }
  if (options.track_running_stats) {
    running_mean_ = register_buffer("running_mean", zeros({num_features}, options.dtype));
    running_var_ = register_buffer("running_var", ones({num_features}, options.dtype));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNormBase::reset_running_stats() {
  if (!options_.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean_.zero_();
  running_var_.fill_(1.0);
  num_batches_tracked_.zero_();
}

// torch.nn.modules.batchnorm._BatchNorm.forward: the batch statistics in training or when no
// running ones are kept; the counter advances (and sets the cumulative-average factor) first.
Tensor BatchNormBase::forward(const Tensor& x) const {
  check_input_dim(x);
  if (x.shape()[1] != num_features_)
    throw ShapeError(fmt::format("{}: x {} has {} channels (dim 1), expected num_features {}",
                                 name(), shape_str(x.shape()), x.shape()[1], num_features_));
  const bool training = is_training();
  const int64_t per_channel = x.numel() / num_features_;
  if (training &&
      per_channel == 1)  // checked before the counter moves: a failed call changes nothing
    throw ValueError(
        fmt::format("{}: expected more than 1 value per channel when training, got input size {}",
                    name(), shape_str(x.shape())));
  double factor = options_.momentum.value_or(0.0);
  if (training && options_.track_running_stats) {
    NoGradGuard no_grad;
    Tensor counter = num_batches_tracked_;
    counter.fill_(static_cast<double>(counter.item<int64_t>() + 1));
    if (!options_.momentum) factor = 1.0 / static_cast<double>(counter.item<int64_t>());
  }
  const bool use_batch_stats = training || !options_.track_running_stats;
  const bool use_running = !training || options_.track_running_stats;
  return batch_norm(x, use_running ? running_mean_ : Tensor(),
                    use_running ? running_var_ : Tensor(), weight_, bias_, use_batch_stats, factor,
                    options_.eps);
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  if (x.dim() != 2 && x.dim() != 3)
    throw ShapeError(fmt::format("BatchNorm1d: expected 2D (N, C) or 3D (N, C, L) input, got {}",
                                 shape_str(x.shape())));
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  if (x.dim() != 4)
    throw ShapeError(
        fmt::format("BatchNorm2d: expected 4D (N, C, H, W) input, got {}", shape_str(x.shape())));
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options)
    : Module("GroupNorm"), num_groups_(num_groups), num_channels_(num_channels), eps_(options.eps) {
  if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups != 0)
    throw ValueError(fmt::format(
        "GroupNorm: num_channels must be divisible by num_groups, got {} channels and {} groups",
        num_channels, num_groups));
  if (options.affine) {
    weight_ = register_parameter("weight", ones({num_channels}, options.dtype));
    bias_ = register_parameter("bias", zeros({num_channels}, options.dtype));
  }
}

Tensor GroupNorm::forward(const Tensor& x) const {
  if (x.dim() < 2 || x.shape()[1] != num_channels_)
    throw ShapeError(fmt::format("GroupNorm: x {} must be (N, C, *) with C = num_channels = {}",
                                 shape_str(x.shape()), num_channels_));
  return group_norm(x, num_groups_, weight_, bias_, eps_);
}

RMSNorm::RMSNorm(Shape normalized_shape, const RMSNormOptions& options)
    : Module("RMSNorm"), normalized_shape_(std::move(normalized_shape)), eps_(options.eps) {
  if (options.elementwise_affine)
    weight_ = register_parameter("weight", ones(normalized_shape_, options.dtype));
}

Tensor RMSNorm::forward(const Tensor& x) const {
  return rms_norm(x, normalized_shape_, weight_, eps_);
}

}  // namespace nabla::nn
