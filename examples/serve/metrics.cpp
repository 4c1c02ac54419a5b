#include "examples/serve/metrics.h"

#include <fmt/format.h>

#include <time.h>

#include <algorithm>

namespace nabla::serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<size_t>(bucket)];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name) const {
  std::string out;
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
  return out;
}

Metrics::Metrics()
    : batch_sizes_({1, 2, 4, 8, 16, 32, 64, 128}),
      latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}) {}

void Metrics::request(const std::string& path, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{path, status}];
  if (path == "/v1/predict") latency_.observe(seconds);
}

void Metrics::batch(int64_t size, int64_t queue_depth, double worker_cpu_seconds, int64_t wakeups) {
  std::lock_guard lock(mu_);
  batch_sizes_.observe(static_cast<double>(size));
  queue_depth_ = queue_depth;
  worker_cpu_ += worker_cpu_seconds;
  wakeups_ += wakeups;
}

void Metrics::set_queue_depth(int64_t depth) {
  std::lock_guard lock(mu_);
  queue_depth_ = depth;
}

int64_t Metrics::requests(int status) const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [key, count] : requests_)
    if (key.second == status) n += count;
  return n;
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out =
      "# HELP nabla_serve_requests_total HTTP requests answered, by path and status code.\n"
      "# TYPE nabla_serve_requests_total counter\n";
  for (const auto& [key, count] : requests_)
    out += fmt::format("nabla_serve_requests_total{{path=\"{}\",code=\"{}\"}} {}\n", key.first,
                       key.second, count);
  out +=
      "# HELP nabla_serve_batch_size Requests per model batch.\n"
      "# TYPE nabla_serve_batch_size histogram\n";
  out += batch_sizes_.render("nabla_serve_batch_size");
  out +=
      "# HELP nabla_serve_request_duration_seconds /v1/predict latency, arrival to answer.\n"
      "# TYPE nabla_serve_request_duration_seconds histogram\n";
  out += latency_.render("nabla_serve_request_duration_seconds");
  out += fmt::format(
      "# HELP nabla_serve_queue_depth Requests waiting for a batch.\n"
      "# TYPE nabla_serve_queue_depth gauge\nnabla_serve_queue_depth {}\n",
      queue_depth_);
  timespec process{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &process);
  const double process_cpu =
      static_cast<double>(process.tv_sec) + 1e-9 * static_cast<double>(process.tv_nsec);
  out += fmt::format(
      "# HELP nabla_serve_cpu_seconds_total CPU time: the /v1/predict handlers on the HTTP "
      "threads, the batcher's worker thread (the model's other OpenMP threads not included), "
      "the whole process.\n"
      "# TYPE nabla_serve_cpu_seconds_total counter\n"
      "nabla_serve_cpu_seconds_total{{part=\"http_handlers\"}} {:.6f}\n"
      "nabla_serve_cpu_seconds_total{{part=\"batch_worker\"}} {:.6f}\n"
      "nabla_serve_cpu_seconds_total{{part=\"process\"}} {:.6f}\n",
      handler_cpu_, worker_cpu_, process_cpu);
  out += fmt::format(
      "# HELP nabla_serve_worker_wakeups_total Times the batcher's worker woke up.\n"
      "# TYPE nabla_serve_worker_wakeups_total counter\nnabla_serve_worker_wakeups_total {}\n",
      wakeups_);
  out += fmt::format(
      "# HELP nabla_serve_model_forwards_total Model forward calls (a batch may run as several "
      "groups of similar length).\n"
      "# TYPE nabla_serve_model_forwards_total counter\nnabla_serve_model_forwards_total {}\n"
      "# HELP nabla_serve_model_rows_total Rows run by the model (langid: windows).\n"
      "# TYPE nabla_serve_model_rows_total counter\nnabla_serve_model_rows_total {}\n"
      "# HELP nabla_serve_model_tokens_total Tokens run by the model: real, and with padding.\n"
      "# TYPE nabla_serve_model_tokens_total counter\n"
      "nabla_serve_model_tokens_total{{kind=\"real\"}} {}\n"
      "nabla_serve_model_tokens_total{{kind=\"padded\"}} {}\n",
      work_.forwards, work_.rows, work_.tokens, work_.padded_tokens);
  return out;
}

}  // namespace nabla::serve
