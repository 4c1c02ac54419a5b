// Normalisation layers beside LayerNorm (nn/layers.h): BatchNorm1d, BatchNorm2d, GroupNorm,
// RMSNorm. Parameter and buffer names, defaults and train/eval behaviour follow PyTorch
// (torch.nn.BatchNorm1d etc.), so state dicts move both ways.
#pragma once
#include <cstdint>
#include <optional>

#include "nabla/nn/module.h"

namespace nabla::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  // Weight of the new batch in the running statistics; nullopt = cumulative average
  // (1 / num_batches_tracked), PyTorch's momentum=None.
  std::optional<double> momentum = 0.1;
  bool affine = true;               // learnable weight (ones) and bias (zeros)
  bool track_running_stats = true;  // buffers running_mean, running_var, num_batches_tracked
  DType dtype = kFloat32;
};

// PyTorch's _BatchNorm: training normalises with the batch statistics and updates the running
// ones; eval uses the running ones (or the batch's when track_running_stats is false).
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&BatchNormBase::forward, x); }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }
  int64_t num_features() const { return num_features_; }
  const BatchNormOptions& options() const { return options_; }
  void reset_running_stats();  // running_mean 0, running_var 1, num_batches_tracked 0

 protected:
  BatchNormBase(std::string type_name, int64_t num_features, const BatchNormOptions& options);
  virtual void check_input_dim(const Tensor& x) const = 0;

 private:
  int64_t num_features_;
  BatchNormOptions options_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

// Input (N, C) or (N, C, L).
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, const BatchNormOptions& options = {})
      : BatchNormBase("BatchNorm1d", num_features, options) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// Input (N, C, H, W).
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {})
      : BatchNormBase("BatchNorm2d", num_features, options) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;  // learnable per-channel weight (ones) and bias (zeros)
  DType dtype = kFloat32;
};

// Input (N, C, *): C channels in num_groups groups; per-channel weight (ones) and bias (zeros).
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&GroupNorm::forward, x); }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t num_groups_, num_channels_;
  double eps_;
  Tensor weight_, bias_;
};

// Root-mean-square over the trailing dims normalized_shape, weight = 1 at init (no bias);
// eps nullopt = the dtype's machine epsilon, as PyTorch.
struct RMSNormOptions {
  std::optional<double> eps = std::nullopt;
  bool elementwise_affine = true;
  DType dtype = kFloat32;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, const RMSNormOptions& options = {});
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&RMSNorm::forward, x); }
  const Tensor& weight() const { return weight_; }

 private:
  Shape normalized_shape_;
  std::optional<double> eps_;
  Tensor weight_;
};

}  // namespace nabla::nn
