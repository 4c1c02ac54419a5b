// optim::Adam (L2 weight decay added to the gradient) and optim::AdamW (decoupled weight decay),
// with optional AMSGrad, following torch.optim.Adam / AdamW's updates exactly.
#pragma once
#include <vector>

#include "nabla/optim/optimizer.h"

namespace nabla::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: p *= 1 - lr * wd
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options);
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options);
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, const AdamOptions& options,
       bool decoupled_weight_decay);
  void update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& state) override;
  // One pass over all of the group's parameters (a multi-tensor kernel).
  void update_group(const ParamGroup& group, const std::vector<ParamUpdate>& updates) override;
  std::vector<std::string> state_keys() const override;

 private:
  AdamOptions options_;
  bool decoupled_;
};

// AdamW's options: as Adam's, but weight decay is decoupled and defaults to 1e-2 (as PyTorch).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options);
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options);
};

}  // namespace nabla::optim
