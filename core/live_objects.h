// Live-object counters: how many TensorImpl, Storage and autograd Node objects exist right now.
// Always on: each constructor and destructor does one relaxed atomic add on its own cache line
// (a few ns next to the allocation it goes with). A leak or a reference cycle shows up as a count
// that does not come back: after a training step's tensors go out of scope, live_objects().nodes
// is 0 again (docs/reliability.md, "Leaks and growth").
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

struct alignas(64) LiveCounter {
  std::atomic<int64_t> count{0};
  void add(int64_t d) { count.fetch_add(d, std::memory_order_relaxed); }
};
extern LiveCounter live_tensor_impls, live_storages, live_nodes;

// A member of TensorImpl: counts every TensorImpl, default-constructed or copied, without giving
// TensorImpl itself a constructor (it stays an aggregate).
struct TensorImplCount {
  TensorImplCount() { live_tensor_impls.add(1); }
  TensorImplCount(const TensorImplCount&) { live_tensor_impls.add(1); }
  TensorImplCount& operator=(const TensorImplCount&) { return *this; }
  ~TensorImplCount() { live_tensor_impls.add(-1); }
};

}  // namespace detail
}  // namespace nabla
