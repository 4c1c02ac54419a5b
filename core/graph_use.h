// One graph, one thread at a time. Any thread may record ops on top of any graph (recording
// reads the nodes below it and never changes them), but running a node's backward, or reading
// its saved tensors and hooks in the inspect tools, is done by one thread at a time. A backward
// pass (backward, autograd::grad) claims every node it will run until it ends; export_graph,
// GradientProbe and MemoryLedger::snapshot claim the nodes they read while they read them.
// Another thread that wants a claimed node gets an AutogradError naming the node, instead of
// racing on its saved tensors, its hooks and the leaves' .grad: PyTorch locks each node, nabla's
// nodes have no locks (docs/autograd.md, "Threads").
#pragma once
#include <cstdint>

namespace nabla {

class Node;

// A claim of one node by this thread, released when destroyed or moved from. It does not own
// the node: whoever claims keeps the node alive until the claim is released.
class NodeUse {
 public:
  NodeUse() = default;
  ~NodeUse() { release(); }
  NodeUse(NodeUse&& other) noexcept : node_(other.node_) { other.node_ = nullptr; }
  NodeUse& operator=(NodeUse&& other) noexcept;
  NodeUse(const NodeUse&) = delete;
  NodeUse& operator=(const NodeUse&) = delete;

  // Claims `node`; throws AutogradError naming `who` and the node if another thread holds it.
  // A node this thread already holds (a backward started from a hook of another) is used
  // without a second claim.
  void claim(Node& node, const char* who);
  // As claim(), but returns false instead of throwing.
  bool try_claim(Node& node);
  void release();

 private:
  Node* node_ = nullptr;  // set while this object holds the claim
};

namespace detail {
// This thread's token in Node's claim word: unique, never 0.
uint64_t graph_thread_token();
}  // namespace detail

}  // namespace nabla
