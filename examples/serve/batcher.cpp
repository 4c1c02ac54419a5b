#include "examples/serve/batcher.h"

#include <time.h>

#include <algorithm>

namespace nabla::serve {

Batcher::Batcher(ModelAdapter& model, BatcherOptions options, BatchObserver observer)
    : model_(model), options_(options), observer_(std::move(observer)) {
  if (options_.max_batch < 1) throw std::invalid_argument("Batcher: max_batch must be >= 1");
  if (options_.max_queue < 1) throw std::invalid_argument("Batcher: max_queue must be >= 1");
  worker_ = std::thread([this] { work(); });
}

Batcher::~Batcher() { stop(); }

Batcher::Ticket Batcher::submit(Input input) {
  auto job = std::make_unique<Job>();
  model_.prepare(input);
  job->length = model_.length(input);
  job->input = std::move(input);
  job->arrived = Clock::now();
  job->cancelled = std::make_shared<std::atomic<bool>>(false);
  Ticket ticket{job->promise.get_future(), job->cancelled};
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw QueueFull("the server is shutting down");
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue)
      throw QueueFull("the request queue is full (" + std::to_string(options_.max_queue) +
                      " waiting); retry later");
    queue_.push_back(std::move(job));
    // The worker waits either for a first request or, with one, for max_batch of them (or the
    // deadline, which needs no notification): a wake-up for anything else finds nothing to do.
    wake = worker_waits_for_first_ || static_cast<int64_t>(queue_.size()) >= options_.max_batch;
  }
  if (wake) cv_.notify_one();  // the worker is the only waiter
  return ticket;
}

void Batcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int64_t Batcher::queue_depth() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

std::vector<std::unique_ptr<Batcher::Job>> Batcher::take_batch() {
  // Cancelled requests (their caller timed out) are dropped unanswered: nobody waits for them.
  std::erase_if(queue_, [](const auto& j) { return j->cancelled->load(); });
  std::vector<std::unique_ptr<Job>> batch;
  if (queue_.empty()) return batch;
  const size_t take = std::min(queue_.size(), static_cast<size_t>(options_.max_batch));
  std::vector<size_t> order(queue_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (options_.group_by_length) {
    // The oldest first, then the others by distance in length to it (ties: arrival order).
    const int64_t anchor = queue_.front()->length;
    std::stable_sort(order.begin() + 1, order.end(), [&](size_t a, size_t b) {
      return std::abs(queue_[a]->length - anchor) < std::abs(queue_[b]->length - anchor);
    });
  }
  order.resize(take);
  std::sort(order.begin(), order.end());
  for (size_t k = order.size(); k-- > 0;) {
    batch.push_back(std::move(queue_[order[k]]));
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(order[k]));
  }
  std::reverse(batch.begin(), batch.end());
  return batch;
}

namespace {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

void Batcher::work() {
  const auto max_wait = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.max_wait_ms));
  for (;;) {
    std::vector<std::unique_ptr<Job>> batch;
    BatchStats stats;
    double cpu0 = 0;
    {
      std::unique_lock lock(mu_);
      worker_waits_for_first_ = true;
      cv_.wait(lock, [&] {
        ++wakeups_;
        return stopping_ || !queue_.empty();
      });
      worker_waits_for_first_ = false;
      if (queue_.empty()) return;  // stopping and drained
      // Wait for company until the oldest request's max_wait is over (not when stopping: then
      // drain as fast as possible).
      const auto deadline = queue_.front()->arrived + max_wait;
      cv_.wait_until(lock, deadline, [&] {
        ++wakeups_;
        return stopping_ || static_cast<int64_t>(queue_.size()) >= options_.max_batch;
      });
      cpu0 = thread_cpu_seconds();
      batch = take_batch();
      stats.queue_depth = static_cast<int64_t>(queue_.size());
      stats.wakeups = wakeups_;
      wakeups_ = 0;
    }
    if (batch.empty()) continue;
    std::vector<const Input*> inputs;
    for (const auto& j : batch) inputs.push_back(&j->input);
    try {
      std::vector<Prediction> out = model_.predict(inputs);
      for (size_t i = 0; i < batch.size(); ++i) batch[i]->promise.set_value(std::move(out[i]));
    } catch (...) {
      for (auto& j : batch) j->promise.set_exception(std::current_exception());
    }
    stats.size = static_cast<int64_t>(batch.size());
    stats.worker_cpu_seconds = thread_cpu_seconds() - cpu0;
    if (observer_) observer_(stats);
  }
}

}  // namespace nabla::serve
