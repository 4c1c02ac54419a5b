#include "examples/common/training_run.h"

#include <fmt/format.h>

#include "nabla/core/error.h"

namespace nabla::examples {

namespace {

std::vector<std::string> csv_columns(const TrainingRun::Options& o) {
  std::vector<std::string> columns = {"step", "epoch", "loss"};
  if (o.log_lr) columns.emplace_back("lr");
  for (const auto& m : o.metrics) columns.push_back(m.column);
  return columns;
}

}  // namespace

TrainingRun::TrainingRun(Options options, nn::Module& model, optim::Optimizer& optimizer,
                         optim::LRScheduler* scheduler, std::function<data::LoaderCursor()> cursor)
    : options_(std::move(options)),
      optimizer_(optimizer),
      checkpointer_(options_.out + "/checkpoint.safetensors", model, optimizer, scheduler,
                    options_.average),
      cursor_(std::move(cursor)) {
  if (options_.writer)
    csv_.emplace(options_.out + "/metrics.csv", csv_columns(options_), options_.resume);
  if (options_.resume) {
    if (auto saved = checkpointer_.load()) {
      state_ = saved->first;
      resumed_at_ = saved->second;
      if (options_.writer)
        fmt::print("resumed from {} at step {}\n", checkpointer_.path(), state_.step);
    }
  }
  losses_ = LossCurve(state_.loss_ema);
  if (options_.writer) bar_.emplace("train", options_.total_steps, 50, state_.step, options_.unit);
}

double TrainingRun::lr() const { return optimizer_.param_groups()[0].lr; }

bool TrainingRun::step_done(double loss, int64_t items) {
  const int64_t step = ++state_.step;
  state_.loss_ema = losses_.add(step, loss);
  std::map<std::string, double> shown = {{"loss", state_.loss_ema}};
  if (options_.log_lr) shown["lr"] = lr();
  if (bar_) bar_->update(step, shown, items);
  const bool epoch_end = step % options_.steps_per_epoch == 0 || step == options_.total_steps;
  if (epoch_end && bar_) bar_->finish();
  return epoch_end;
}

void TrainingRun::end_epoch(const std::vector<double>& values) {
  if (values.size() != options_.metrics.size())
    throw ValueError(fmt::format("TrainingRun::end_epoch: {} values for {} metrics", values.size(),
                                 options_.metrics.size()));
  const int64_t step = state_.step, per_epoch = options_.steps_per_epoch;
  const int64_t epoch = (step + per_epoch - 1) / per_epoch;
  std::string line =
      fmt::format("epoch {} step {}: train loss {:.4f}", epoch, step, state_.loss_ema);
  std::vector<double> row = {static_cast<double>(step), static_cast<double>(epoch),
                             state_.loss_ema};
  if (options_.log_lr) row.push_back(lr());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!options_.metrics[i].label.empty())
      line += fmt::format(", {} {:.4f}", options_.metrics[i].label, values[i]);
    row.push_back(values[i]);
    if (options_.metrics[i].validation_loss)
      losses_.add_validation(step, values[i], options_.metrics[i].label);
  }
  if (options_.writer) {
    fmt::print("{} ({:.1f} s)\n", line, seconds());
    csv_->row(row);
    checkpointer_.save(state_, cursor_());
  }
  if (options_.stop_after > 0 && step >= options_.stop_after && step < options_.total_steps) {
    if (options_.writer)
      fmt::print("stopping at step {} as asked (--stop-after); continue with --resume\n", step);
    stopped_ = true;
  }
}

}  // namespace nabla::examples
