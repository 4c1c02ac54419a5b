// Pieces every example trainer shares: a resumable checkpoint of the whole run, the smoothed
// loss curve, the warm-up + cosine learning-rate schedule, length-bucketed batches and a
// confusion matrix.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"
#include "nabla/data/dataloader.h"
#include "nabla/nn/module.h"
#include "nabla/optim/lr_scheduler.h"
#include "nabla/optim/optimizer.h"

namespace nabla::examples {

// Where a run stands. With the model, optimizer, scheduler, default generator (dropout masks)
// and the loader's cursor it is enough to continue exactly as if the run had never stopped.
struct RunState {
  int64_t step = 0;
  double loss_ema = 0;  // smoothed training loss shown by the progress bar and the CSV
};

// Saves and restores a run in one safetensors file (written atomically: a crash mid-save
// keeps the previous checkpoint).
class Checkpointer {
 public:
  // average: a second module saved beside the model as section "average" (e.g. a
  // WeightAverage), or none.
  Checkpointer(std::string path, nn::Module& model, optim::Optimizer& optimizer,
               optim::LRScheduler* scheduler = nullptr, nn::Module* average = nullptr);
  void save(const RunState& state, const data::LoaderCursor& cursor) const;
  // Restores everything from the file and returns the run's state and loader cursor; nullopt
  // (and nothing touched) when the file does not exist.
  std::optional<std::pair<RunState, data::LoaderCursor>> load() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  nn::Module& model_;
  optim::Optimizer& optimizer_;
  optim::LRScheduler* scheduler_;
  nn::Module* average_;
};

// The per-step training loss and its exponential moving average (factor 0.98), and a held-out
// loss measured now and then (the validation curve).
class LossCurve {
 public:
  explicit LossCurve(double ema = 0) : ema_(ema) {}
  // Records the loss of `step` (1-based) and returns the updated average.
  double add(int64_t step, double loss);
  // A held-out loss measured after `step`, named `label` in the legend.
  void add_validation(int64_t step, double loss, const std::string& label);
  double ema() const { return ema_; }
  // One chart: the per-step loss (faint), its running mean and the validation points
  // (path.png and path.svg).
  void plot(const std::string& path, const std::string& title, const std::string& ylabel) const;

 private:
  double ema_;
  std::vector<double> steps_, losses_, validation_steps_, validation_losses_;
  std::string validation_label_;
};

// Linear warm-up from 1% of `peak_lr` over `warmup` steps, then cosine decay to 1% at
// `total_steps`. `warmup` is capped at a fifth of the run so short runs still decay.
std::unique_ptr<optim::LRScheduler> warmup_cosine(optim::Optimizer& optimizer, double peak_lr,
                                                  int64_t warmup, int64_t total_steps);

// Batches of equal or similar length: indices sorted by length (ties in a seeded random order),
// cut into runs of `batch_size`. Less padding, so less wasted work, and for a recurrent encoder
// a final state that has not run over padding, as at inference. Shuffle the batch order per
// epoch by loading batch ids with a DataLoader.
std::vector<std::vector<int64_t>> length_buckets(const std::vector<size_t>& lengths,
                                                 int64_t batch_size, uint64_t seed);

// For trainers fed by length_buckets: the caching allocator may give a request a free block of up
// to twice its size class (allocator::set_best_fit_ratio), unless NABLA_BEST_FIT_RATIO is set. A
// step's buffers follow its batch's length; with exact classes each length's blocks aged out of
// the cache before that length came again and were mapped and faulted in anew (transformer_langid:
// ~7,500 page faults a step). At 2x a step reuses another length's blocks: its default run 95.5 ->
// 90.4 s, peak RSS 374 -> 331 MB (AMD EPYC Zen 4, docs/perf.md). transformer_g2p does not call
// it: there it cut the faults too but the epoch took 4% longer.
void reuse_blocks_across_lengths();

// counts[true][predicted] over a fixed list of class names.
class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(std::vector<std::string> labels);
  // truth, predicted: int64 tensors of the same length, values in [0, classes).
  void add(const Tensor& truth, const Tensor& predicted);
  int64_t total() const;
  double accuracy() const;
  // The table on stdout, one row per true class.
  void print() const;
  void save_heatmap(const std::string& path) const;

 private:
  std::vector<std::string> labels_;
  std::vector<std::vector<int64_t>> counts_;
};

}  // namespace nabla::examples
