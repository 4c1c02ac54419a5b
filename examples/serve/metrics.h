// The server's counters in the Prometheus text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/): requests by endpoint and status
// code, a histogram of batch sizes, a histogram of request latencies, the queue depth; and where
// the CPU goes (per-thread CPU clocks, not wall time, so that the figures mean something on a
// shared machine): the predict handlers' CPU on the HTTP threads, the batcher worker's, the whole
// process's, the worker's wake-ups, and the model's rows and real vs padded tokens.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "examples/serve/model_adapter.h"

namespace nabla::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // The _bucket (cumulative, with +Inf), _sum and _count lines of metric `name`.
  std::string render(const std::string& name) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& path, int status, double seconds);
  // A /v1/predict request read by a handler (answered or not yet).
  void received() {
    std::lock_guard lock(mu_);
    ++received_;
  }
  int64_t received_count() const {
    std::lock_guard lock(mu_);
    return received_;
  }
  void batch(int64_t size, int64_t queue_depth, double worker_cpu_seconds = 0, int64_t wakeups = 0);
  // CPU seconds (CLOCK_THREAD_CPUTIME_ID) one /v1/predict handler spent on its HTTP thread:
  // parsing, tokenising, queueing, building the answer (not httplib's reading and writing).
  void handler_cpu(double seconds) {
    std::lock_guard lock(mu_);
    handler_cpu_ += seconds;
  }
  void set_work(const WorkCounts& work) {
    std::lock_guard lock(mu_);
    work_ = work;
  }
  void set_queue_depth(int64_t depth);
  std::string render() const;
  int64_t requests(int status) const;  // over all endpoints

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  Histogram batch_sizes_, latency_;
  int64_t queue_depth_ = 0, received_ = 0, wakeups_ = 0;
  double handler_cpu_ = 0, worker_cpu_ = 0;
  WorkCounts work_;
};

}  // namespace nabla::serve
