// Claims of nodes by threads (see graph_use.h).
#include "nabla/core/graph_use.h"

#include <fmt/format.h>

#include <atomic>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"

namespace nabla {

namespace detail {

uint64_t graph_thread_token() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t token = next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

}  // namespace detail

NodeUse& NodeUse::operator=(NodeUse&& other) noexcept {
  if (this != &other) {
    release();
    node_ = other.node_;
    other.node_ = nullptr;
  }
  return *this;
}

bool NodeUse::try_claim(Node& node) {
  release();
  const uint64_t me = detail::graph_thread_token();
  uint64_t holder = 0;
  // acquire: what the previous holder did to the node (released saved tensors, .grad) is seen.
  if (node.used_by_.compare_exchange_strong(holder, me, std::memory_order_acquire)) {
    node_ = &node;
    return true;
  }
  return holder == me;
}

void NodeUse::claim(Node& node, const char* who) {
  if (!try_claim(node))
    throw AutogradError(fmt::format(
        "{}: {} (forward op '{}') is in use on another thread, whose backward pass (or "
        "export_graph, GradientProbe, MemoryLedger::snapshot) is running through this graph; "
        "one thread at a time may run or inspect a graph: join that thread first",
        who, node.name(), node.forward_op()));
}

void NodeUse::release() {
  if (!node_) return;
  node_->used_by_.store(0, std::memory_order_release);
  node_ = nullptr;
}

}  // namespace nabla
