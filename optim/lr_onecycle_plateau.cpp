// OneCycleLR (steps through phases by step count) and ReduceLROnPlateau (steps on a metric),
// ported from PyTorch 1.13.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "nabla/core/error.h"
#include "nabla/optim/lr_scheduler.h"
#include "nabla/optim/scheduler_state.h"

namespace nabla::optim {

using detail::StateReader;
using detail::vector_tensor;

// ----------------------------------------------------------------------------
// OneCycleLR

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
                       const OneCycleOptions& options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr),
                 total_steps, options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       const OneCycleOptions& options)
    : LRScheduler(optimizer, "OneCycleLR"), total_steps_(total_steps), options_(options) {
  const size_t n = optimizer.param_groups().size();
  if (max_lrs.size() != n)
    throw ValueError(
        fmt::format("OneCycleLR: expected {} max_lrs (one per group), got {}", n, max_lrs.size()));
  if (total_steps <= 0)
    throw ValueError(fmt::format("OneCycleLR: total_steps must be > 0, got {}", total_steps));
  if (!(options.pct_start >= 0 && options.pct_start <= 1))
    throw ValueError(
        fmt::format("OneCycleLR: pct_start must be in [0, 1], got {}", options.pct_start));
  if (!(options.div_factor > 0) || !(options.final_div_factor > 0))
    throw ValueError(fmt::format("OneCycleLR: div factors must be > 0, got {} and {}",
                                 options.div_factor, options.final_div_factor));
  const double up_end = options.pct_start * static_cast<double>(total_steps) - 1;
  const double last = static_cast<double>(total_steps - 1);
  if (options.three_phase)
    phases_ = {{up_end, 0, 1},
               {2 * options.pct_start * static_cast<double>(total_steps) - 2, 1, 0},
               {last, 0, 2}};
  else
    phases_ = {{up_end, 0, 1}, {last, 1, 2}};
  double start = 0;
  for (const Phase& p : phases_) {
    if (p.end_step == start)
      throw ValueError(
          fmt::format("OneCycleLR: a phase of zero length (pct_start {} with total_steps {})",
                      options.pct_start, total_steps));
    start = p.end_step;
  }
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < n; ++g) {
    const double initial = max_lrs[g] / options.div_factor;
    groups[g].initial_lr = initial;
    base_lrs_[g] = initial;
    lrs_.push_back({initial, max_lrs[g], initial / options.final_div_factor});
  }
  initial_step();
}

std::vector<double> OneCycleLR::get_lr() const {
  const int64_t step_num = last_epoch_;
  if (step_num > total_steps_)
    throw ValueError(fmt::format("OneCycleLR: tried to step {} times; total_steps is {}",
                                 step_num + 1, total_steps_));
  const auto s = static_cast<double>(step_num);
  std::vector<double> lrs;
  for (const auto& group : lrs_) {
    double start_step = 0, lr = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& phase = phases_[i];
      if (s <= phase.end_step || i + 1 == phases_.size()) {
        const double pct = (s - start_step) / (phase.end_step - start_step);
        const double from = group[static_cast<size_t>(phase.start)];
        const double to = group[static_cast<size_t>(phase.end)];
        lr = options_.anneal_strategy == AnnealStrategy::Cos
                 ? to + (from - to) / 2.0 * (std::cos(std::numbers::pi * pct) + 1)
                 : (to - from) * pct + from;
        break;
      }
      start_step = phase.end_step;
    }
    lrs.push_back(lr);
  }
  return lrs;
}

// ----------------------------------------------------------------------------
// ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const PlateauOptions& options)
    : optimizer_(optimizer), options_(options) {
  if (!(options.factor < 1.0))
    throw ValueError(fmt::format("ReduceLROnPlateau: factor must be < 1, got {}", options.factor));
  best_ = options.mode == PlateauMode::Min ? std::numeric_limits<double>::infinity()
                                           : -std::numeric_limits<double>::infinity();
  for (const ParamGroup& g : optimizer_.param_groups()) last_lr_.push_back(g.lr);
}

bool ReduceLROnPlateau::is_better(double a) const {
  const double t = options_.threshold;
  const bool rel = options_.threshold_mode == ThresholdMode::Rel;
  if (options_.mode == PlateauMode::Min) return rel ? a < best_ * (1. - t) : a < best_ - t;
  return rel ? a > best_ * (t + 1.) : a > best_ + t;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {  // bad epochs during cooldown do not count
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  auto& groups = optimizer_.param_groups();
  if (num_bad_epochs_ > options_.patience) {
    for (ParamGroup& g : groups) {
      const double new_lr = std::max(g.lr * options_.factor, options_.min_lr);
      if (g.lr - new_lr > options_.eps) g.lr = new_lr;
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const ParamGroup& g : groups) last_lr_.push_back(g.lr);
}

NamedTensors ReduceLROnPlateau::state_dict() const {
  return {{"best", scalar_tensor(best_, kFloat64)},
          {"num_bad_epochs", scalar_tensor(static_cast<double>(num_bad_epochs_), kInt64)},
          {"cooldown_counter", scalar_tensor(static_cast<double>(cooldown_counter_), kInt64)},
          {"last_epoch", scalar_tensor(static_cast<double>(last_epoch_), kInt64)},
          {"last_lr", vector_tensor(last_lr_)}};
}

void ReduceLROnPlateau::load_state_dict(const NamedTensors& dict) {
  StateReader r("ReduceLROnPlateau", dict);
  const double best = r.float64("best");
  const int64_t bad = r.int64("num_bad_epochs"), cooldown = r.int64("cooldown_counter");
  const int64_t last_epoch = r.int64("last_epoch");
  std::vector<double> last_lr = r.vec("last_lr", optimizer_.param_groups().size());
  r.finish();
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  last_epoch_ = last_epoch;
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = last_lr[i];
  last_lr_ = std::move(last_lr);
}

}  // namespace nabla::optim
