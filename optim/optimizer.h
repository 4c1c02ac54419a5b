// optim::Optimizer: the base of SGD, Adam and AdamW. It owns the parameter groups and the
// per-parameter state (named tensors such as "exp_avg", and a 0-d int64 "step"), runs every
// update under NoGradGuard, and exports all of it as a flat list of named tensors, so a checkpoint
// is one safetensors file:
//   state.<i>.<key>               per-parameter state; i indexes parameters across groups in order
//   param_groups.<g>.lr           0-d float64 (also weight_decay, and initial_lr once a schedule
//   set it) param_groups.<g>.params       1-D int64: the parameter indices of group g
// optim does not depend on nn: it takes tensors (e.g. model->parameters()) or groups of them.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nabla/core/io/safetensors.h"
#include "nabla/core/tensor.h"

namespace nabla::optim {

using NamedTensors = io::NamedTensors;

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = -1;            // < 0: the optimizer's default
  double weight_decay = -1;  // < 0: the optimizer's default
  double initial_lr = -1;    // the schedule's base lr, set by the first LRScheduler (< 0: unset)
};

// One parameter's state, by name ("step" is a 0-d int64 tensor; the rest have the param's shape).
using ParamState = std::map<std::string, Tensor>;

// One parameter's share of a step: the parameter (updated in place), its gradient (contiguous,
// the parameter's shape and dtype) and its state.
struct ParamUpdate {
  Tensor param;
  Tensor grad;
  ParamState* state;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (others are skipped), under NoGradGuard.
  void step();
  // set_to_none: grads become undefined (the next backward allocates); else they are zeroed.
  void zero_grad(bool set_to_none = true);

  const std::string& name() const { return name_; }
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  size_t num_params() const { return state_.size(); }
  // The state of parameter i (global index); empty before its first update.
  const ParamState& state(size_t i) const;

  // Copies of the state and the group hyper-parameters (see the header comment for the names).
  NamedTensors state_dict() const;
  // Restores a state_dict() of an optimizer of the same type over the same parameter layout.
  // Validates everything first (a failure changes nothing); state is converted to each parameter's
  // dtype.
  void load_state_dict(const NamedTensors& dict);

 protected:
  Optimizer(std::string name, std::vector<ParamGroup> groups, double default_lr,
            double default_weight_decay);
  // Updates p in place from grad (contiguous, p's shape and dtype); creates state on first use.
  virtual void update(const ParamGroup& group, Tensor& p, const Tensor& grad,
                      ParamState& state) = 0;
  // Updates the parameters of one group that have a gradient, in order. The default calls
  // update() on each; an optimizer with a multi-tensor kernel overrides it to do one pass.
  virtual void update_group(const ParamGroup& group, const std::vector<ParamUpdate>& updates);
  // The keys a parameter's state holds after its first update (for load_state_dict checks).
  virtual std::vector<std::string> state_keys() const = 0;

 private:
  std::string name_;
  std::vector<ParamGroup> groups_;
  std::vector<ParamState> state_;  // by global parameter index
};

// Increments a 0-d int64 "step" tensor in state (creating it at 0) and returns the new count.
int64_t increment_step(ParamState& state);

}  // namespace nabla::optim
