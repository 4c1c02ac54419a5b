// optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay,
// following torch.optim.SGD's update exactly.
#pragma once
#include <vector>

#include "nabla/optim/optimizer.h"

namespace nabla::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient
  bool nesterov = false;    // needs momentum > 0 and dampening = 0
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  const SGDOptions& options() const { return options_; }

 protected:
  void update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& state) override;
  std::vector<std::string> state_keys() const override;

 private:
  SGDOptions options_;
};

}  // namespace nabla::optim
