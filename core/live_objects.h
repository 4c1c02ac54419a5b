// Live-object counters: how many TensorImpl, Storage and autograd Node objects exist right now.
// Always on. Each thread counts in counters of its own, which only it writes (a load and a
// store: a recorded op makes and frees six of these objects, and six locked read-modify-writes
// on shared counters cost more than the rest of the counting); live_objects() sums every
// thread's. A leak or a reference cycle shows up as a count that does not come back: after a
// training step's tensors go out of scope, live_objects().nodes is 0 again (docs/reliability.md,
// "Leaks and growth").
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

namespace nabla {

struct LiveObjects {
  int64_t tensor_impls = 0;  // tensors and views (each view is its own TensorImpl)
  int64_t storages = 0;      // buffers (shared by a tensor and its views)
  int64_t nodes = 0;         // autograd nodes, AccumulateGrad included
  bool operator==(const LiveObjects&) const = default;
};

// A snapshot of the three counts (exact when no other thread creates or destroys meanwhile).
LiveObjects live_objects();
std::string to_string(const LiveObjects& live);  // "tensors 12, storages 9, nodes 0"

namespace detail {

enum LiveKind : int { kLiveTensorImpls, kLiveStorages, kLiveNodes, kLiveKinds };

// One thread's counts; registered so that live_objects() can read them.
struct LiveCounts {
  std::atomic<int64_t> count[kLiveKinds] = {};
};
extern constinit thread_local LiveCounts*
    live_counts_of_thread;                        // null until first use, after exit
LiveCounts* register_live_counts();               // the thread's counts, or null once it is exiting
void count_orphan(LiveKind kind, int64_t delta);  // objects made or freed during thread exit

inline void count_live(LiveKind kind, int64_t delta) {
  LiveCounts* c = live_counts_of_thread;
  if (c == nullptr) [[unlikely]] {
    c = register_live_counts();
    if (c == nullptr) return count_orphan(kind, delta);
  }
  std::atomic<int64_t>& n = c->count[kind];
  n.store(n.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

// A member of TensorImpl: counts every TensorImpl, default-constructed or copied, without giving
// TensorImpl itself a constructor (it stays an aggregate).
struct TensorImplCount {
  TensorImplCount() { count_live(kLiveTensorImpls, 1); }
  TensorImplCount(const TensorImplCount&) { count_live(kLiveTensorImpls, 1); }
  TensorImplCount& operator=(const TensorImplCount&) { return *this; }
  ~TensorImplCount() { count_live(kLiveTensorImpls, -1); }
};

}  // namespace detail
}  // namespace nabla
