// Learning-rate schedules: the LRScheduler base and the epoch-based schedules. Each get_lr() is a
// line-by-line port of PyTorch 1.13's (the recursive forms read the optimizer's current lr), and
// each closed_form_lr() of its _get_closed_form_lr.
#include "nabla/optim/lr_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "nabla/core/error.h"
#include "nabla/optim/scheduler_state.h"

namespace nabla::optim {

using detail::StateReader;
using detail::vector_tensor;

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

// ----------------------------------------------------------------------------
// LRScheduler

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name)
    : optimizer_(optimizer), name_(std::move(name)) {
  for (ParamGroup& g : optimizer_.param_groups()) {
    if (g.initial_lr < 0) g.initial_lr = g.lr;  // PyTorch's setdefault('initial_lr', lr)
    base_lrs_.push_back(g.initial_lr);
  }
}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> lrs;
  for (const ParamGroup& g : optimizer_.param_groups()) lrs.push_back(g.lr);
  return lrs;
}

void LRScheduler::set_lrs(const std::vector<double>& lrs) {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = lrs[i];
  last_lr_ = lrs;
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  set_lrs(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  std::vector<double> lrs = closed_form_lr();
  set_lrs(lrs.empty() ? get_lr() : lrs);
}

NamedTensors LRScheduler::state_dict() const {
  return {{"last_epoch", scalar_tensor(static_cast<double>(last_epoch_), kInt64)},
          {"step_count", scalar_tensor(static_cast<double>(step_count_), kInt64)},
          {"base_lrs", vector_tensor(base_lrs_)},
          {"last_lr", vector_tensor(last_lr_)}};
}

void LRScheduler::load_state_dict(const NamedTensors& dict) {
  StateReader r(name_, dict);
  const size_t n = optimizer_.param_groups().size();
  const int64_t last_epoch = r.int64("last_epoch"), step_count = r.int64("step_count");
  std::vector<double> base_lrs = r.vec("base_lrs", n), last_lr = r.vec("last_lr", n);
  r.finish();
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base_lrs);
  set_lrs(last_lr);
}

// ----------------------------------------------------------------------------
// StepLR

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0)
    throw ValueError(fmt::format("StepLR: step_size must be > 0, got {}", step_size));
  initial_step();
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * std::pow(gamma_, static_cast<double>(floor_div(last_epoch_, step_size_))));
  return lrs;
}

// ----------------------------------------------------------------------------
// MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (hits == 0) return lrs;
  for (double& lr : lrs) lr = lr * std::pow(gamma_, static_cast<double>(hits));
  return lrs;
}

std::vector<double> MultiStepLR::closed_form_lr() const {
  const auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

// ----------------------------------------------------------------------------
// ExponentialLR

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::vector<double> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}

// ----------------------------------------------------------------------------
// CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0)
    throw ValueError(fmt::format("CosineAnnealingLR: T_max must be > 0, got {}", t_max));
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  constexpr double pi = std::numbers::pi;
  const auto e = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  for (size_t i = 0; i < lrs.size(); ++i) {
    const double base = base_lrs_[i];
    if (step_count_ == 1 && last_epoch_ > 0)
      lrs[i] = eta_min_ + (base - eta_min_) * (1 + std::cos(e * pi / T)) / 2;
    else if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)
      lrs[i] = lrs[i] + (base - eta_min_) * (1 - std::cos(pi / T)) / 2;
    else
      lrs[i] = (1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) * (lrs[i] - eta_min_) +
               eta_min_;
  }
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  const auto e = static_cast<double>(last_epoch_), T = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(std::numbers::pi * e / T)) / 2);
  return lrs;
}

// ----------------------------------------------------------------------------
// LinearLR

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1) || !(end_factor >= 0 && end_factor <= 1))
    throw ValueError(fmt::format(
        "LinearLR: expected 0 < start_factor <= 1 and 0 <= end_factor <= 1, got {} and {}",
        start_factor, end_factor));
  if (total_iters <= 0)
    throw ValueError(fmt::format("LinearLR: total_iters must be > 0, got {}", total_iters));
  initial_step();
}

std::vector<double> LinearLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double delta = end_factor_ - start_factor_;
  for (double& lr : lrs)
    lr = lr * (1. + delta / (static_cast<double>(total_iters_) * start_factor_ +
                             static_cast<double>(last_epoch_ - 1) * delta));
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  const auto done = static_cast<double>(std::min(total_iters_, last_epoch_));
  std::vector<double> lrs;
  for (double base : base_lrs_)
    lrs.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * done /
                                              static_cast<double>(total_iters_)));
  return lrs;
}

// ----------------------------------------------------------------------------
// SequentialLR

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  if (schedulers_.empty()) throw ValueError("SequentialLR: needs at least one scheduler");
  for (size_t k = 0; k < schedulers_.size(); ++k)
    if (!schedulers_[k] || &schedulers_[k]->optimizer_ != &optimizer)
      throw ValueError(
          fmt::format("SequentialLR: scheduler {} is null or drives a different optimizer", k));
  if (milestones_.size() + 1 != schedulers_.size())
    throw ValueError(fmt::format(
        "SequentialLR: expected one milestone fewer than schedulers, got {} schedulers and {} "
        "milestones",
        schedulers_.size(), milestones_.size()));
  if (!std::is_sorted(milestones_.begin(), milestones_.end()))
    throw ValueError("SequentialLR: milestones must be increasing");
  // As PyTorch: back to the initial lrs, undo each scheduler's initial step, and start the first.
  last_epoch_ = 0;
  for (ParamGroup& g : optimizer_.param_groups()) g.lr = g.initial_lr;
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->last_lr_;
}

void SequentialLR::step() {
  ++last_epoch_;
  const auto idx = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_)
    s.step_to(0);
  else
    s.step();
  last_lr_ = s.last_lr_;
}

NamedTensors SequentialLR::state_dict() const {
  NamedTensors out = {{"last_epoch", scalar_tensor(static_cast<double>(last_epoch_), kInt64)},
                      {"last_lr", vector_tensor(last_lr_)}};
  for (size_t k = 0; k < schedulers_.size(); ++k)
    for (auto& [key, t] : schedulers_[k]->state_dict())
      out.emplace_back(fmt::format("schedulers.{}.{}", k, key), t);
  return out;
}

void SequentialLR::load_state_dict(const NamedTensors& dict) {
  NamedTensors own;
  std::vector<NamedTensors> sub(schedulers_.size());
  for (const auto& [key, t] : dict) {
    bool matched = false;
    for (size_t k = 0; k < schedulers_.size() && !matched; ++k) {
      const std::string prefix = fmt::format("schedulers.{}.", k);
      if (key.rfind(prefix, 0) == 0) {
        sub[k].emplace_back(key.substr(prefix.size()), t);
        matched = true;
      }
    }
    if (!matched) own.emplace_back(key, t);
  }
  StateReader r(name_, own);
  const int64_t last_epoch = r.int64("last_epoch");
  std::vector<double> last_lr = r.vec("last_lr", optimizer_.param_groups().size());
  r.finish();
  // Load every scheduler; if one fails, put the earlier ones back so nothing changes.
  std::vector<NamedTensors> backup;
  for (auto& s : schedulers_) backup.push_back(s->state_dict());
  const std::vector<double> lrs_before = current_lrs();
  size_t k = 0;
  try {
    for (; k < schedulers_.size(); ++k) schedulers_[k]->load_state_dict(sub[k]);
  } catch (...) {
    for (size_t j = 0; j < k; ++j) schedulers_[j]->load_state_dict(backup[j]);
    set_lrs(lrs_before);
    throw;
  }
  last_epoch_ = last_epoch;
  set_lrs(last_lr);
}

}  // namespace nabla::optim
