// Dynamic batching (the serving pattern of e.g. NVIDIA Triton's dynamic batcher and TorchServe's
// batch_size/max_batch_delay): requests wait in a bounded queue; one worker thread takes the
// oldest request, waits until max_wait has passed since it arrived or max_batch requests are
// queued, then runs it together with the queued requests closest to it in length (less
// padding), as one padded batch. The oldest request is always in the next batch, so none
// starves. Submitting wakes the worker only when it has something to do (the queue was empty, or
// now holds max_batch), not once per request. All model work happens on that one thread, with
// the model's threads (--threads): HTTP threads only parse, prepare, wait and answer, so they
// never compete with the model's OpenMP team for the cores (the busy-CPU collapse of issue 16).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "examples/serve/model_adapter.h"

namespace nabla::serve {

struct BatcherOptions {
  int64_t max_batch = 32;       // requests per batch (1: no dynamic batching)
  double max_wait_ms = 5;       // how long the oldest request may wait for others
  int64_t max_queue = 256;      // queued requests beyond this are refused (QueueFull -> 503)
  bool group_by_length = true;  // pick the batch's other requests by closeness in length
};

// Thrown by submit: the queue is full, or the batcher is stopping.
struct QueueFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Batcher {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the worker thread after each batch with its size, the queue depth left, the worker
  // thread's CPU seconds for the batch (CLOCK_THREAD_CPUTIME_ID: taking it, the model's
  // forward, answering; the model's other OpenMP threads not included) and how often the worker
  // woke up for it.
  struct BatchStats {
    int64_t size = 0, queue_depth = 0;
    double worker_cpu_seconds = 0;
    int64_t wakeups = 0;
  };
  using BatchObserver = std::function<void(const BatchStats&)>;

  Batcher(ModelAdapter& model, BatcherOptions options, BatchObserver observer = {});
  ~Batcher();  // stop()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // A ticket for one request: wait on `result`; cancel() if the caller gives up (timeout), so
  // that the worker skips it if it has not started yet.
  struct Ticket {
    std::future<Prediction> result;
    std::shared_ptr<std::atomic<bool>> cancelled;
    void cancel() const { cancelled->store(true); }
  };
  // Prepares (ModelAdapter::prepare, on the calling thread) and queues one input; throws
  // QueueFull when max_queue requests wait or after stop().
  Ticket submit(Input input);

  // Refuses new requests, finishes every queued one, joins the worker. Idempotent.
  void stop();
  int64_t queue_depth() const;
  const BatcherOptions& options() const { return options_; }

 private:
  struct Job {
    Input input;
    int64_t length = 0;
    Clock::time_point arrived;
    std::promise<Prediction> promise;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  void work();
  std::vector<std::unique_ptr<Job>> take_batch();  // with mu_ held

  ModelAdapter& model_;
  BatcherOptions options_;
  BatchObserver observer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stopping_ = false;
  bool worker_waits_for_first_ = false;  // the worker sleeps until the queue is non-empty
  int64_t wakeups_ = 0;                  // the worker's wake-ups since its last batch
  std::thread worker_;
};

}  // namespace nabla::serve
