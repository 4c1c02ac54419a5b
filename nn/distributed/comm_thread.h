// Internal to DistributedDataParallel: one background thread that starts and completes the
// collectives handed to it, so they progress while the caller's thread runs backward (Horovod's
// background thread; PyTorch's ProcessGroup work threads). docs/distributed.md, "The
// communication thread".
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "nabla/nn/distributed/dist.h"

namespace nabla::dist::detail {

class CommThread {
 public:
  CommThread();
  // Completes what was handed over (each collective within its deadline), then joins.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Hands over one collective: `start` runs on the thread, in submission order, and returns
  // the Work the thread then drives to completion.
  void submit(std::function<Work()> start);
  // Blocks until every submitted collective is done; then rethrows the first error the thread
  // met (it stays: later calls rethrow it too).
  void wait_all();

  // Counts since construction, readable from any thread (DDP's bucket_progress()): collectives
  // handed over, started on the thread (MPI's non-blocking call issued), and completed.
  size_t submitted() const;
  size_t started() const { return started_.load(std::memory_order_acquire); }
  size_t completed() const;

 private:
  void run();

  std::condition_variable wake_;  // the thread: new work or stop
  std::condition_variable idle_;  // wait_all: everything done
  mutable std::mutex mutex_;
  std::vector<std::function<Work()>> queue_;
  size_t submitted_ = 0;
  std::atomic<size_t> started_{0};
  size_t completed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace nabla::dist::detail
