// CommThread (comm_thread.h). OpenMPI's non-blocking collectives advance only inside MPI calls
// (its shared-memory transport has no progress thread of its own), so a collective started
// during backward would otherwise wait for the next MPI call, usually finish(). This thread
// makes those calls: it starts each collective handed to it and polls the ones in flight with
// MPI_Test (Work::test, which also enforces the deadline) until they complete.
#include "nabla/nn/distributed/comm_thread.h"

#include <chrono>
#include <utility>

#include "nabla/nn/distributed/dist_detail.h"

namespace nabla::dist::detail {

namespace {
// Between polls of an unfinished collective: a few back-to-back polls (a small message completes
// in microseconds), then sleeps of kPollInterval (woken early by new work). The sleeps leave the
// core to backward: OpenMPI binds each of <= 2 ranks to one core, which this thread shares with
// the rank's compute thread.
constexpr int kSpinPolls = 8;
constexpr auto kPollInterval = std::chrono::microseconds(20);
}  // namespace

CommThread::CommThread() : thread_([this] { run(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CommThread::submit(std::function<Work()> start) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(start));
    ++submitted_;
  }
  wake_.notify_one();
}

void CommThread::wait_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return completed_ == submitted_; });
  if (error_) std::rethrow_exception(error_);
}

size_t CommThread::submitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return submitted_;
}

size_t CommThread::completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

void CommThread::run() {
  std::vector<Work> in_flight;
  int idle_polls = 0;
  for (;;) {
    std::vector<std::function<Work()>> to_start;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (in_flight.empty())
        wake_.wait(lock, [&] { return !queue_.empty() || stop_; });
      else if (idle_polls >= kSpinPolls)
        wake_.wait_for(lock, kPollInterval, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty() && in_flight.empty() && stop_) return;
      to_start.swap(queue_);
    }
    size_t finished = 0;
    std::exception_ptr error;
    // Collectives start in submission order: every rank submits the same sequence.
    for (auto& start : to_start) {
      try {
        in_flight.push_back(start());
      } catch (...) {
        if (!error) error = std::current_exception();
        ++finished;
      }
      started_.fetch_add(1, std::memory_order_release);
    }
    std::vector<Work> unfinished;
    for (Work& work : in_flight) {
      bool done = false;
      try {
        done = work.test();
      } catch (...) {
        if (!error) error = std::current_exception();
        done = true;
      }
      if (done)
        ++finished;
      else
        unfinished.push_back(std::move(work));
    }
    in_flight.swap(unfinished);
    // After a timeout or MPI error the communicator is unusable: the rest are abandoned (their
    // Work ends at once; the InitGuard aborts the job).
    if (broken()) {
      finished += in_flight.size();
      in_flight.clear();
    }
    idle_polls = finished > 0 ? 0 : idle_polls + 1;
    if (finished > 0 || error) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        completed_ += finished;
        if (error && !error_) error_ = error;
      }
      idle_.notify_all();
    }
  }
}

}  // namespace nabla::dist::detail
