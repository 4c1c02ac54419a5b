// The autograd graph: Node (one per recorded op, named <Op>Backward), SavedTensor (what a
// backward formula needs, with an in-place check), grad-mode guards and the engine's entry points.
//
// Rules every op follows:
//   - a node has exactly one output (the op's result) and one edge per input;
//   - it saves only what its formula needs, as SavedTensor fields declared `SavedTensor x{this,
//   "x"};`;
//   - backward returns one gradient per input, in the *output's* broadcast shape if it likes:
//     the engine sums it down to the input's shape (broadcasting is undone once, there).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "nabla/core/graph_use.h"
#include "nabla/core/inline_vector.h"
#include "nabla/core/inspect/cuts.h"
#include "nabla/core/object_pool.h"
#include "nabla/core/tensor.h"

namespace nabla {

class SavedTensor;
class PackedTensor;
namespace inspect {
struct ModuleScope;
}

struct Edge {
  std::shared_ptr<Node> fn;  // null when that input needs no gradient
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grad has the output's shape; returns one gradient per input (undefined = zero).
  virtual std::vector<Tensor> backward(const Tensor& grad) = 0;
  virtual const char* name() const = 0;  // e.g. "TanhBackward"
  // False for fused kernels whose backward is not itself recorded: create_graph refuses them.
  virtual bool backward_is_differentiable() const { return true; }
  // Optional fast path of single-input view nodes (slice, select): add this node's gradient for
  // its input into `input_grad`, a buffer of the input's shape that only the engine can see,
  // instead of returning a zero-filled full-size tensor for the engine to sum. Called only
  // outside grad mode. Returns false when the node has no such path.
  virtual bool backward_into(const Tensor& /*grad*/, Tensor& /*input_grad*/) { return false; }

  std::string forward_op() const;  // "tanh" for "TanhBackward"
  bool needs_input_grad(size_t i) const { return i < next.size() && next[i].fn != nullptr; }
  void release_saved();  // frees every SavedTensor of this node
  uint64_t sequence_nr() const { return sequence_nr_; }
  // What the node saved (the inspect tools read their sizes).
  const SmallVector<SavedTensor*, 4>& saved_tensors() const { return saved_; }
  // FLOPs of the node's own backward kernels, 0 if unknown; ops its formula calls record
  // their own (core/inspect/profiler.h).
  virtual int64_t backward_flops() const { return 0; }

  // One entry per input; up to three inline (core/inline_vector.h: no heap blocks per node).
  InlineVector<Edge, 3> next;
  InlineVector<Shape, 3> input_shapes;
  SmallVector<DType, 4> input_dtypes;
  std::vector<GradHook> pre_hooks;  // hooks on the output tensor (a non-leaf)
  // The module whose forward created this node (core/inspect/scope.h); null outside modules.
  std::shared_ptr<const inspect::ModuleScope> module_scope;

 private:
  friend class SavedTensor;
  friend class NodeUse;
  SmallVector<SavedTensor*, 4> saved_;
  uint64_t sequence_nr_;
  std::atomic<uint64_t> used_by_{0};  // the thread running or inspecting it (graph_use.h), or 0
};

// A tensor kept for backward. Remembers the storage version at save time: if an in-place op
// changed it afterwards, get() throws naming the node. An op's own output is saved without a
// strong reference to the node (that would be a shared_ptr cycle and leak the graph).
// `name` is the field's name in the node, for graph pictures (a string literal, not copied).
// Under saved-tensor hooks (core/saved_tensor_hooks.h) it keeps what the hook packed instead.
class SavedTensor {
 public:
  explicit SavedTensor(Node* owner, const char* name = nullptr);
  SavedTensor(const SavedTensor&) = delete;
  SavedTensor& operator=(const SavedTensor&) = delete;

  void save(const Tensor& t, bool is_output = false);
  Tensor get() const;
  bool defined() const { return data_ != nullptr || packed_ != nullptr || released_; }
  void release();
  // The saved data without the in-place check, null once released or if a hook packed it.
  const std::shared_ptr<TensorImpl>& peek() const { return data_; }

  const char* name() const { return name_; }  // null if the op gave none
  bool released() const { return released_; }

 private:
  Node* owner_;
  const char* name_;
  std::shared_ptr<TensorImpl> data_;
  std::shared_ptr<PackedTensor> packed_;  // what saved-tensor hooks kept instead of data_
  std::weak_ptr<Node> output_fn_;
  uint64_t version_ = 0;
  bool is_output_ = false;
  bool released_ = false;
};

// Leaf gradient sink: adds the incoming gradient into leaf.grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> backward(const Tensor& grad) override;
  const char* name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// --- grad mode ----------------------------------------------------------------
struct GradMode {
  static bool enabled();
  static void set_enabled(bool on);
};

// Disables recording for its scope (thread-local), like torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Enables recording for its scope (used by the engine for create_graph).
class EnableGradGuard {
 public:
  explicit EnableGradGuard(bool on = true) : prev_(GradMode::enabled()) {
    GradMode::set_enabled(on);
  }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// --- recording helpers for ops -------------------------------------------------
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

// Returns a new node with edges to `inputs` if grad mode is on and any input requires grad,
// else nullptr. The op then fills the node's saved fields and calls set_history(output, node).
template <class N, class... Args>
std::shared_ptr<N> make_node(std::initializer_list<const Tensor*> inputs, Args&&... args);
void connect_inputs(Node& node, std::initializer_list<const Tensor*> inputs);
void set_history(Tensor& output, std::shared_ptr<Node> node);  // by value: one refcount, moved
// a + b for two gradients of the same shape and dtype (recorded under create_graph).
Tensor grad_sum(const Tensor& a, const Tensor& b);
// True if no other handle or view can see t's data: a gradient buffer the engine may add into in
// place (PyTorch's InputBuffer steals such buffers too).
bool exclusively_owned(const Tensor& t);
// dst += src in place, for gradient buffers of one shape and dtype (any strides). Not recorded;
// bumps dst's version.
void grad_add_(const Tensor& dst, const Tensor& src);
// The edge a gradient for `t` flows into: its grad_fn, or its leaf accumulator, or null.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

template <class N, class... Args>
std::shared_ptr<N> make_node(std::initializer_list<const Tensor*> inputs, Args&&... args) {
  if (!GradMode::enabled()) {
    // A gradient report is recording: an input that requires grad is cut here (no-grad mode).
    if (inspect::recording_cuts()) inspect::detail::note_no_grad_op(typeid(N), inputs);
    return nullptr;
  }
  if (!any_requires_grad(inputs)) return nullptr;
  auto node = std::allocate_shared<N>(detail::PoolAllocator<N>(), std::forward<Args>(args)...);
  connect_inputs(*node, inputs);
  return node;
}

// --- anomaly mode ----------------------------------------------------------------
// When on, every gradient a node produces is checked for NaN/Inf; the error names the node, the
// forward op that created it and the module scope it ran in.
struct AnomalyMode {
  static bool enabled();
  static void set_enabled(bool on);
};
// True when the engine checks gradients for NaN/Inf: AnomalyMode, or a gradient report
// recording on this thread (core/inspect/cuts.h).
bool anomaly_checks_enabled();
// The engine's answer to a non-finite gradient `grad` that `node` produced for input `input`:
// an active recorder keeps the first one; under AnomalyMode it throws AutogradError.
void on_non_finite_gradient(const Node& node, size_t input, const Tensor& grad);
// "tanh" for "TanhBackward", "max_all" for "MaxAllBackward".
std::string forward_op_name(const std::string& node_name);
class AnomalyGuard {
 public:
  AnomalyGuard() : prev_(AnomalyMode::enabled()) { AnomalyMode::set_enabled(true); }
  ~AnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool prev_;
};

namespace autograd {

// Accumulates d(outputs)/d(leaf) into every reachable leaf's .grad.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad. An input the outputs do not depend
// on gets an undefined Tensor if allow_unused, else an error.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace autograd
}  // namespace nabla
