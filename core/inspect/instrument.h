// The points where nabla's inspect tools (the backward trace, the profiler and the memory ledger)
// see the program run: OpScope at the entry of every public op in ops/, GemmScope in the one
// GEMM (ops/gemm.cpp), NodeWatch around each backward node in the engine (core/engine.cpp).
//
// All tools are off by default. Off, each point costs one relaxed atomic load and a branch (and
// a scope's destructor one branch on a member); everything else is out of line, in
// instrument.cpp, and runs only while a tool is on.
#pragma once
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::inspect {

// What an event is: an op's forward, a backward node, or one call into ops/gemm.cpp.
enum class EventKind : uint8_t { Op, Backward, Gemm };

namespace detail {
enum Tool : uint32_t { kProfiler = 1, kTrace = 2, kLedger = 4 };
extern std::atomic<uint32_t> active_tools;
inline uint32_t tools() { return active_tools.load(std::memory_order_relaxed); }
void set_tool(Tool tool, bool on);
void on_node_recorded(const std::shared_ptr<Node>& node);
void on_saved_tensor_read(const TensorImpl& data);
// Writes `text` to `path`; throws IOError naming `who`, the path and the reason.
void write_text_file(const char* who, const std::string& path, const std::string& text);
}  // namespace detail

// Put first in a public op: `inspect::OpScope scope("matmul", {&a, &b});`. Events nest: an op
// that calls ops (a composite) is the parent of their events, and its self time excludes them.
class OpScope {
 public:
  OpScope(const char* name, std::initializer_list<const Tensor*> inputs) {
    if (detail::tools() & (detail::kProfiler | detail::kLedger)) [[unlikely]]
      open(name, inputs.begin(), inputs.size());
  }
  OpScope(const char* name, const std::vector<Tensor>& inputs) {
    if (detail::tools() & (detail::kProfiler | detail::kLedger)) [[unlikely]]
      open_list(name, inputs);
  }
  ~OpScope() {
    if (slot_ >= 0) [[unlikely]]
      close();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  // The op's FLOPs (one multiply-add = 2), computed only while a tool records:
  // `scope.count_flops([&] { return 2 * m * n * k; });`. Set it before calling other ops, so
  // that their FLOPs are known to be part of this op's.
  template <class F>
  void count_flops(F&& flops) {
    if (slot_ >= 0) [[unlikely]]
      set_flops(static_cast<int64_t>(flops()));
  }

 private:
  void open(const char* name, const Tensor* const* inputs, size_t n);
  void open_list(const char* name, const std::vector<Tensor>& inputs);
  void close();
  void set_flops(int64_t flops);
  int32_t slot_ = -1;  // depth of this op's open event on its thread; -1 when not recording
};

// One call into ops/gemm.cpp: C (m x n) += A (m x k) B (k x n), 2 m n k FLOPs.
class GemmScope {
 public:
  GemmScope(int64_t m, int64_t n, int64_t k, DType dtype) {
    if (detail::tools() & detail::kProfiler) [[unlikely]]
      open(m, n, k, dtype);
  }
  ~GemmScope() {
    if (slot_ >= 0) [[unlikely]]
      close();
  }
  GemmScope(const GemmScope&) = delete;
  GemmScope& operator=(const GemmScope&) = delete;

 private:
  void open(int64_t m, int64_t n, int64_t k, DType dtype);
  void close();
  int32_t slot_ = -1;
};

// Around one backward node in the engine: `NodeWatch watch(node, grad); ...; watch.done(grads);`
// `grads` are what the node returned (empty when it wrote into its input's buffer instead).
class NodeWatch {
 public:
  NodeWatch(Node& node, const Tensor& grad) {
    if (detail::tools()) [[unlikely]]
      open(node, grad);
  }
  void done(const std::vector<Tensor>& grads) {
    if (state_) [[unlikely]]
      finish(grads);
  }
  ~NodeWatch() {
    if (state_) [[unlikely]]
      abandon();  // the node threw: close its event, record nothing
  }
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

 private:
  struct State;
  void open(Node& node, const Tensor& grad);
  void finish(const std::vector<Tensor>& grads);
  void abandon();
  State* state_ = nullptr;
};

// Hooks in core/autograd.cpp, each behind one relaxed load: a recorded node (the ledger counts
// its saved tensors) and a saved tensor read by a backward formula (the trace counts its bytes).
inline void node_recorded(const std::shared_ptr<Node>& node) {
  if (detail::tools() & detail::kLedger) [[unlikely]]
    detail::on_node_recorded(node);
}
inline void saved_tensor_read(const TensorImpl& data) {
  if (detail::tools() & detail::kTrace) [[unlikely]]
    detail::on_saved_tensor_read(data);
}

}  // namespace nabla::inspect
