// Learning-rate schedules, ported from torch.optim.lr_scheduler so the printed values agree with
// PyTorch's (including its recursive "chainable" forms). A schedule writes each group's lr into
// its optimizer; call optimizer.step() then scheduler.step() once per epoch (or iteration).
// Constructing a schedule performs its initial step (epoch 0), as in PyTorch. A schedule keeps a
// reference to its optimizer, which must outlive it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nabla/optim/optimizer.h"

namespace nabla::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch and sets the new learning rates.
  virtual void step();
  // The learning rates set by the last step, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::string& name() const { return name_; }
  Optimizer& optimizer() const { return optimizer_; }

  // last_epoch, step_count (0-d int64), base_lrs, last_lr (1-D float64).
  virtual NamedTensors state_dict() const;
  // Restores a state_dict() and writes last_lr into the optimizer's groups, so the order of
  // restoring optimizer and schedule does not matter.
  virtual void load_state_dict(const NamedTensors& dict);

 protected:
  LRScheduler(Optimizer& optimizer, std::string name);
  // The learning rates for last_epoch_ from the current ones (PyTorch's get_lr).
  virtual std::vector<double> get_lr() const = 0;
  // The learning rates for last_epoch_ from base_lrs_ alone, if the schedule has such a form
  // (PyTorch's _get_closed_form_lr); empty otherwise.
  virtual std::vector<double> closed_form_lr() const { return {}; }
  // Every constructor ends with this: resets the step count and performs the epoch-0 step.
  void initial_step();
  // PyTorch's step(epoch): jumps to `epoch` using the closed form when there is one.
  void step_to(int64_t epoch);
  std::vector<double> current_lrs() const;
  void set_lrs(const std::vector<double>& lrs);

  Optimizer& optimizer_;
  std::string name_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> last_lr_;

  friend class SequentialLR;
};

// lr = base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = base_lr * gamma^(number of milestones <= epoch); a repeated milestone counts twice.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr = base_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;

 private:
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, computed recursively as
// PyTorch does (so it continues periodically past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// lr = base_lr * (start_factor + (end_factor - start_factor) min(epoch, total_iters) /
// total_iters): a linear warm-up.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// Runs schedulers[k] from milestones[k-1] on (each restarted at its epoch 0 there); all must
// drive `optimizer`. E.g. LinearLR warm-up for 5 epochs, then CosineAnnealingLR: milestones {5}.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  // Its own last_epoch plus each scheduler's state under "schedulers.<k>.".
  NamedTensors state_dict() const override;
  void load_state_dict(const NamedTensors& dict) override;

 protected:
  std::vector<double> get_lr() const override { return last_lr_; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

enum class AnnealStrategy { Cos, Linear };

struct OneCycleOptions {
  double pct_start = 0.3;  // fraction of the steps spent increasing the lr
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  double div_factor = 25;         // initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min_lr = initial_lr / final_div_factor
  bool three_phase = false;       // also anneal back to initial_lr before the final phase
};

// The 1cycle policy: initial_lr -> max_lr -> min_lr over total_steps steps (the lr only; PyTorch's
// momentum cycling is not done, i.e. cycle_momentum=False). Stepping past total_steps throws.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
             const OneCycleOptions& options = {});  // one max_lr per group
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
             const OneCycleOptions& options = {});

 protected:
  std::vector<double> get_lr() const override;

 private:
  struct Phase {
    double end_step;
    int start, end;  // 0 initial_lr, 1 max_lr, 2 min_lr
  };
  int64_t total_steps_;
  OneCycleOptions options_;
  std::vector<Phase> phases_;
  std::vector<std::vector<double>> lrs_;  // per group: {initial_lr, max_lr, min_lr}
};

enum class PlateauMode { Min, Max };
enum class ThresholdMode { Rel, Abs };

struct PlateauOptions {
  PlateauMode mode = PlateauMode::Min;
  double factor = 0.1;    // new_lr = lr * factor
  int64_t patience = 10;  // bad epochs tolerated before reducing
  double threshold = 1e-4;
  ThresholdMode threshold_mode = ThresholdMode::Rel;
  int64_t cooldown = 0;  // epochs to wait after a reduction
  double min_lr = 0;
  double eps = 1e-8;  // reductions smaller than this are skipped
};

// Reduces the lr when a metric stops improving. Not an LRScheduler: it steps on a metric.
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const PlateauOptions& options = {});
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }

  // best (0-d float64), num_bad_epochs, cooldown_counter, last_epoch (0-d int64), last_lr.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& dict);

 private:
  bool is_better(double a) const;

  Optimizer& optimizer_;
  PlateauOptions options_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace nabla::optim
