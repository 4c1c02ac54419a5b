#include "examples/common/training.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "examples/common/plot.h"
#include "nabla/core/allocator.h"
#include "nabla/core/error.h"
#include "nabla/core/generator.h"
#include "nabla/core/io/checkpoint.h"

namespace nabla::examples {

Checkpointer::Checkpointer(std::string path, nn::Module& model, optim::Optimizer& optimizer,
                           optim::LRScheduler* scheduler, nn::Module* average)
    : path_(std::move(path)),
      model_(model),
      optimizer_(optimizer),
      scheduler_(scheduler),
      average_(average) {}

void Checkpointer::save(const RunState& state, const data::LoaderCursor& cursor) const {
  io::Checkpoint ck;
  ck.put_section("model", model_.state_dict());
  ck.put_section("optimizer", optimizer_.state_dict());
  if (scheduler_) ck.put_section("scheduler", scheduler_->state_dict());
  if (average_) ck.put_section("average", average_->state_dict());
  io::save_generator(ck, "default", default_generator());
  ck.set("step", state.step);
  ck.set("loss_ema", state.loss_ema);
  io::save_loader_position(ck, "train", cursor);
  ck.save(path_);
}

std::optional<std::pair<RunState, data::LoaderCursor>> Checkpointer::load() const {
  if (!std::filesystem::exists(path_)) return std::nullopt;
  io::Checkpoint ck = io::Checkpoint::load(path_);
  model_.load_state_dict(ck.section("model"));
  optimizer_.load_state_dict(ck.section("optimizer"));
  if (scheduler_) scheduler_->load_state_dict(ck.section("scheduler"));
  if (average_) {
    if (!ck.has_section("average"))
      throw ValueError(fmt::format(
          "{} has no weight average: it was written by a run without one; resume with that "
          "run's flags",
          path_));
    average_->load_state_dict(ck.section("average"));
  }
  io::load_generator(ck, "default", default_generator());
  return std::pair{RunState{ck.get_int("step"), ck.get_float("loss_ema")},
                   io::load_loader_position(ck, "train")};
}

double LossCurve::add(int64_t step, double loss) {
  ema_ = step == 1 ? loss : 0.98 * ema_ + 0.02 * loss;
  steps_.push_back(static_cast<double>(step));
  losses_.push_back(loss);
  return ema_;
}

void LossCurve::add_validation(int64_t step, double loss, const std::string& label) {
  validation_steps_.push_back(static_cast<double>(step));
  validation_losses_.push_back(loss);
  validation_label_ = label;
}

void LossCurve::plot(const std::string& path, const std::string& title,
                     const std::string& ylabel) const {
  // A centred running mean, not the exponential average: that one lags a falling loss by ~50
  // steps, which on a short run is most of the curve.
  const int window = std::clamp(static_cast<int>(steps_.size()) / 30 | 1, 1, 401);
  std::vector<viz::Series> series;
  if (window == 1) {
    series.push_back({"train loss", steps_, losses_, viz::kPalette[0]});
  } else {
    series.push_back(
        {"train loss (per step)", steps_, losses_, viz::kPalette[0], false, true, 1, 0.3});
    series.push_back({fmt::format("train loss (mean of {} steps)", window), steps_,
                      viz::running_mean(losses_, window), viz::kPalette[0]});
  }
  if (!validation_steps_.empty())
    series.push_back(
        {validation_label_, validation_steps_, validation_losses_, viz::kPalette[1], true});
  viz::line_plot(path, series, {title, "step", ylabel});
}

std::unique_ptr<optim::LRScheduler> warmup_cosine(optim::Optimizer& optimizer, double peak_lr,
                                                  int64_t warmup, int64_t total_steps) {
  warmup = std::min(warmup, std::max<int64_t>(1, total_steps / 5));
  return std::make_unique<optim::SequentialLR>(
      optimizer,
      std::vector<std::shared_ptr<optim::LRScheduler>>{
          std::make_shared<optim::LinearLR>(optimizer, 0.01, 1.0, warmup),
          std::make_shared<optim::CosineAnnealingLR>(
              optimizer, std::max<int64_t>(1, total_steps - warmup), peak_lr * 0.01)},
      std::vector<int64_t>{warmup});
}

std::vector<std::vector<int64_t>> length_buckets(const std::vector<size_t>& lengths,
                                                 int64_t batch_size, uint64_t seed) {
  if (batch_size <= 0)
    throw ValueError(
        fmt::format("length_buckets: batch_size must be positive, got {}", batch_size));
  const auto n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order = data::epoch_order(n, true, seed, 0);  // the tie-break
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] < lengths[static_cast<size_t>(b)];
  });
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < n; i += batch_size)
    batches.emplace_back(order.begin() + i, order.begin() + std::min(n, i + batch_size));
  return batches;
}

void reuse_blocks_across_lengths() {
  if (std::getenv("NABLA_BEST_FIT_RATIO") == nullptr) allocator::set_best_fit_ratio(2.0);
}

ConfusionMatrix::ConfusionMatrix(std::vector<std::string> labels)
    : labels_(std::move(labels)),
      counts_(labels_.size(), std::vector<int64_t>(labels_.size(), 0)) {}

void ConfusionMatrix::add(const Tensor& truth, const Tensor& predicted) {
  const auto y = truth.to_vector<int64_t>(), p = predicted.to_vector<int64_t>();
  if (y.size() != p.size())
    throw ValueError(
        fmt::format("ConfusionMatrix::add: {} labels but {} predictions", y.size(), p.size()));
  const auto n = static_cast<int64_t>(labels_.size());
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] < 0 || y[i] >= n || p[i] < 0 || p[i] >= n)
      throw ValueError(
          fmt::format("ConfusionMatrix::add: class {} / {} outside [0, {})", y[i], p[i], n));
    counts_[static_cast<size_t>(y[i])][static_cast<size_t>(p[i])]++;
  }
}

int64_t ConfusionMatrix::total() const {
  int64_t t = 0;
  for (const auto& row : counts_)
    for (int64_t v : row) t += v;
  return t;
}

double ConfusionMatrix::accuracy() const {
  int64_t correct = 0;
  for (size_t i = 0; i < counts_.size(); ++i) correct += counts_[i][i];
  const int64_t t = total();
  return t > 0 ? static_cast<double>(correct) / static_cast<double>(t) : 0.0;
}

void ConfusionMatrix::print() const {
  size_t width = 6;
  for (const auto& l : labels_) width = std::max(width, l.size() + 1);
  fmt::print("\nconfusion matrix (rows: true class, columns: predicted)\n{:>{}}", "", width);
  for (const auto& l : labels_) fmt::print("{:>{}}", l, width);
  fmt::print("\n");
  for (size_t i = 0; i < counts_.size(); ++i) {
    fmt::print("{:>{}}", labels_[i], width);
    for (int64_t v : counts_[i]) fmt::print("{:>{}}", v, width);
    fmt::print("\n");
  }
}

void ConfusionMatrix::save_heatmap(const std::string& path) const {
  std::vector<std::vector<double>> values;
  for (const auto& row : counts_) values.emplace_back(row.begin(), row.end());
  viz::heatmap(path, values,
               {.title = fmt::format("confusion matrix (accuracy {:.3f})", accuracy()),
                .xlabel = "predicted class",
                .ylabel = "true class",
                .row_labels = labels_,
                .col_labels = labels_});
}

}  // namespace nabla::examples
