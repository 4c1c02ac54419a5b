#include "nabla/core/live_objects.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace nabla {
namespace detail {

constinit thread_local LiveCounts* live_counts_of_thread = nullptr;

namespace {

// Every thread's counts, and what exited threads left (their objects may live on elsewhere).
struct Registry {
  std::mutex mutex;
  std::vector<LiveCounts*> threads;
  int64_t retired[kLiveKinds] = {};
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads exit after static destruction
  return *r;
}
// Objects made or freed by a thread after its counts were retired (during its exit).
std::atomic<int64_t> orphans[kLiveKinds] = {};

struct Owner {
  LiveCounts counts;
  Owner() {
    std::lock_guard lock(registry().mutex);
    registry().threads.push_back(&counts);
    live_counts_of_thread = &counts;
  }
  ~Owner() {
    live_counts_of_thread = nullptr;  // from now on this thread counts as an orphan
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.threads.erase(std::find(r.threads.begin(), r.threads.end(), &counts));
    for (int k = 0; k < kLiveKinds; ++k) r.retired[k] += counts.count[k].load();
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
};

thread_local bool owner_made = false;

}  // namespace

LiveCounts* register_live_counts() {
  if (owner_made) return live_counts_of_thread;  // null once the owner is gone
  owner_made = true;
  thread_local Owner owner;
  return live_counts_of_thread;
}

void count_orphan(LiveKind kind, int64_t delta) {
  orphans[kind].fetch_add(delta, std::memory_order_relaxed);
}

}  // namespace detail

LiveObjects live_objects() {
  using namespace detail;
  int64_t total[kLiveKinds];
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    for (int k = 0; k < kLiveKinds; ++k) {
      total[k] = r.retired[k] + orphans[k].load(std::memory_order_relaxed);
      for (const LiveCounts* c : r.threads) total[k] += c->count[k].load(std::memory_order_relaxed);
    }
  }
  return {total[kLiveTensorImpls], total[kLiveStorages], total[kLiveNodes]};
}

std::string to_string(const LiveObjects& live) {
  return fmt::format("tensors {}, storages {}, nodes {}", live.tensor_impls, live.storages,
                     live.nodes);
}

}  // namespace nabla
