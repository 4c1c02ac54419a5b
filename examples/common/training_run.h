// The bookkeeping around a trainer's loop, so that its main() can show the training step itself
// in the open. It resumes from <out>/checkpoint.safetensors (--resume), keeps the smoothed loss
// and the progress bar, and at each epoch end prints the summary line, appends a row to
// <out>/metrics.csv, saves the checkpoint and stops early if --stop-after asks. A trainer's loop:
//
//   examples::TrainingRun training(options, model, opt, sched.get(), loader);
//   model.train();
//   while (auto batch = training.next_batch(loader)) {
//     Tensor loss = cross_entropy(model.forward(batch->x), batch->y);
//     opt.zero_grad();
//     loss.backward();
//     optim::clip_grad_norm_(model.parameters(), 1.0);
//     opt.step();
//     sched->step();
//     if (training.step_done(loss.item(), batch_size)) training.end_epoch({evaluate(model)});
//   }
//   if (training.stopped()) return 0;
#pragma once
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "nabla/data/dataloader.h"

namespace nabla::examples {

class TrainingRun {
 public:
  // A value measured at each epoch end: its metrics.csv column and the words that introduce it
  // in the epoch line (empty: the CSV only).
  struct Metric {
    std::string column, label;
    bool validation_loss = false;  // also drawn on the loss chart beside the training loss
  };
  struct Options {
    std::string out;  // directory of checkpoint.safetensors and metrics.csv
    bool resume = false;
    int64_t stop_after = 0;  // stop at the first epoch end at or after this step (0: never)
    int64_t steps_per_epoch = 1, total_steps = 0;
    // metrics.csv columns: step, epoch, loss (the smoothed training loss), lr if log_lr, then
    // these, in order.
    std::vector<Metric> metrics;
    bool log_lr = false;            // the learning rate in the progress bar and metrics.csv
    std::string unit = "examples";  // what step_done's `items` count (throughput)
    // Prints, writes metrics.csv and checkpoints; false on the ranks other than 0 of a
    // data-parallel run (they still read the checkpoint on --resume).
    bool writer = true;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    // Checkpointed with the run (section "average"), e.g. a WeightAverage; none when null.
    nn::Module* average = nullptr;
  };

  // With --resume and an existing checkpoint, restores the model, optimizer, scheduler, default
  // generator and the loader's position: the run continues as if it had never stopped.
  template <class Batch>
  TrainingRun(Options options, nn::Module& model, optim::Optimizer& optimizer,
              optim::LRScheduler* scheduler, data::DataLoader<Batch>& loader)
      : TrainingRun(std::move(options), model, optimizer, scheduler,
                    [&loader] { return loader.cursor(); }) {
    if (resumed_at_) loader.restore(*resumed_at_);
  }

  // The next batch, starting a new epoch when the current one is done; nullopt once the run has
  // taken its total_steps or was stopped.
  template <class Batch>
  std::optional<Batch> next_batch(data::DataLoader<Batch>& loader) {
    if (stopped_ || state_.step >= options_.total_steps) return std::nullopt;
    std::optional<Batch> batch = loader.next();
    if (!batch) {
      loader.next_epoch();
      batch = loader.next();
    }
    return batch;
  }

  // Records one optimizer step's loss (items: examples or tokens it trained on). Returns true
  // when the step ends an epoch: then call end_epoch with the metrics.
  bool step_done(double loss, int64_t items);
  // The epoch line, a metrics.csv row and the checkpoint; values in the order of
  // Options::metrics. Then stops the run if --stop-after says so.
  void end_epoch(const std::vector<double>& values);

  bool stopped() const { return stopped_; }
  int64_t step() const { return state_.step; }
  const LossCurve& losses() const { return losses_; }
  double seconds() const { return seconds_since(options_.start); }

 private:
  TrainingRun(Options options, nn::Module& model, optim::Optimizer& optimizer,
              optim::LRScheduler* scheduler, std::function<data::LoaderCursor()> cursor);
  double lr() const;

  Options options_;
  optim::Optimizer& optimizer_;
  Checkpointer checkpointer_;
  std::function<data::LoaderCursor()> cursor_;
  RunState state_;
  std::optional<data::LoaderCursor> resumed_at_;
  std::optional<CsvLogger> csv_;
  LossCurve losses_;
  std::optional<ProgressBar> bar_;
  bool stopped_ = false;
};

}  // namespace nabla::examples
