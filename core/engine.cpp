// The backward engine: one loop over a ready queue, no recursion (docs/autograd.md walks it).
//   1. count, for every node below the outputs, how many consumers will send it a gradient;
//   2. a node whose count reaches zero has its complete gradient: it joins the ready queue;
//   3. the loop takes the latest-created ready node, calls its backward, and sums each input
//      gradient (broadcasting undone here, once) into the buffer of the node it flows to.
// The two speed shortcuts, autograd::grad's pruning and the inspect tools' watch are helpers the
// loop calls in one line.
#include <fmt/format.h>

#include <cmath>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "nabla/core/autograd.h"
#include "nabla/core/broadcast.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"

namespace nabla {
namespace {

// What the engine keeps for one node during a backward pass.
struct NodeTask {
  int dependencies = 0;  // consumers that have not sent their gradient yet
  Tensor grad;           // the sum of the gradients received so far
  bool receives = true;  // autograd::grad: false if no requested input lies below this node
  bool runs = true;      // autograd::grad: false if none lies strictly below (no backward call)
  NodeUse claim;         // no other thread runs or inspects the node meanwhile (graph_use.h)
};
using Graph = std::unordered_map<Node*, NodeTask>;

// Ready nodes, latest-created first: PyTorch breaks ties by sequence number the same way, and
// since sequence numbers are unique the order (and so every gradient sum) is deterministic.
struct CreatedEarlier {
  bool operator()(const Node* a, const Node* b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};
using ReadyQueue = std::priority_queue<Node*, std::vector<Node*>, CreatedEarlier>;

struct Options {
  bool retain_graph;
  bool create_graph;
  const std::unordered_set<Node*>& capture;  // autograd::grad's inputs; empty for backward()
};

// --- before the loop ---------------------------------------------------------------------------

// Checks the outputs and their gradients; returns the nodes the outputs' gradients flow into.
std::vector<std::shared_ptr<Node>> root_nodes(const std::vector<Tensor>& outputs,
                                              const std::vector<Tensor>& grad_outputs) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw ValueError(
        fmt::format("backward: {} outputs but {} gradients", outputs.size(), grad_outputs.size()));
  std::vector<std::shared_ptr<Node>> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.requires_grad())
      throw AutogradError(
          fmt::format("backward: output {} (shape {}) does not require grad and has no grad_fn", i,
                      shape_str(out.shape())));
    if (i < grad_outputs.size() && grad_outputs[i].defined() &&
        grad_outputs[i].shape() != out.shape())
      throw ShapeError(fmt::format("backward: gradient of shape {} for an output of shape {}",
                                   shape_str(grad_outputs[i].shape()), shape_str(out.shape())));
    if (out.numel() != 1 && (i >= grad_outputs.size() || !grad_outputs[i].defined()))
      throw AutogradError(fmt::format(
          "backward: grad can be implicitly created only for scalar outputs; the output has shape "
          "{}, pass a gradient of that shape",
          shape_str(out.shape())));
    roots.push_back(gradient_edge(out));
  }
  return roots;
}

// The gradient of output i: the caller's, or ones for a scalar.
Tensor output_gradient(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                       size_t i) {
  if (i < grad_outputs.size() && grad_outputs[i].defined()) return grad_outputs[i];
  return ones(outputs[i].shape(), outputs[i].dtype());
}

// Every node below the roots, with its number of consumers (an explicit stack, no recursion),
// claimed for this thread. Each root counts one more: the outputs' gradients arrive as if from
// one node above them all.
Graph count_dependencies(const std::vector<std::shared_ptr<Node>>& roots) {
  Graph graph;
  std::vector<Node*> stack;
  auto add_edge = [&](Node* to) {
    auto [it, first_visit] = graph.try_emplace(to);
    ++it->second.dependencies;
    if (!first_visit) return;
    it->second.claim.claim(*to, "backward");
    stack.push_back(to);
  };
  for (const auto& root : roots) add_edge(root.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next)
      if (e.fn) add_edge(e.fn.get());
  }
  return graph;
}

// autograd::grad: only nodes with a requested input below them receive gradients, and only
// those with one strictly below run their backward. Needs children before parents: a post-order
// depth-first search (explicit stack).
void prune_for_capture(Graph& graph, const std::vector<std::shared_ptr<Node>>& roots,
                       const std::unordered_set<Node*>& capture) {
  if (capture.empty()) return;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& root : roots) {
    if (visited.insert(root.get()).second) stack.emplace_back(root.get(), 0);
    while (!stack.empty()) {
      auto& [node, next_edge] = stack.back();
      if (next_edge < node->next.size()) {
        Node* input = node->next[next_edge++].fn.get();
        if (input && visited.insert(input).second) stack.emplace_back(input, 0);
        continue;
      }
      NodeTask& task = graph.at(node);
      task.runs = false;
      for (const Edge& e : node->next)
        task.runs = task.runs || (e.fn && graph.at(e.fn.get()).receives);
      task.receives = task.runs || capture.count(node) > 0;
      stack.pop_back();
    }
  }
}

// --- the steps of the loop ---------------------------------------------------------------------

// Shortcut: outside grad mode, a contiguous buffer that no other handle or view can see is added
// into in place instead of being replaced by a new sum (as PyTorch's InputBuffer does).
bool try_accumulate_in_place(Tensor& buffer, const Tensor& g) {
  if (GradMode::enabled() || !buffer.is_contiguous() || !exclusively_owned(buffer)) return false;
  grad_add_(buffer, g);
  return true;
}

// Sums a gradient into a node's buffer (an undefined gradient is zero and adds nothing).
void add_to_buffer(Tensor& buffer, const Tensor& g) {
  if (!g.defined()) return;
  if (!buffer.defined())
    buffer = g;
  else if (!try_accumulate_in_place(buffer, g))
    buffer = grad_sum(buffer, g);  // recorded under create_graph
}

Tensor run_pre_hooks(const Node& node, Tensor grad) {
  for (const GradHook& hook : node.pre_hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  return grad;
}

// Shortcut: a single-input view node (slice, select) adds its gradient straight into the window
// of its input's buffer (Node::backward_into), instead of returning a zero-filled full-size
// tensor to be summed. Returns false when the shortcut does not apply.
bool try_backward_into(Graph& graph, Node& node, const Tensor& grad, const Options& options) {
  if (options.create_graph || anomaly_checks_enabled() || node.next.size() != 1 || !node.next[0].fn)
    return false;
  NodeTask& input = graph.at(node.next[0].fn.get());
  if (!input.receives || !input.grad.defined() || !input.grad.is_contiguous() ||
      !exclusively_owned(input.grad) || !node.backward_into(grad, input.grad))
    return false;
  if (!options.retain_graph) node.release_saved();
  return true;
}

std::vector<Tensor> call_backward(Node& node, const Tensor& grad, const Options& options) {
  if (options.create_graph && !node.backward_is_differentiable())
    throw AutogradError(fmt::format(
        "{}: this op's backward is a fused kernel that is not differentiable; create_graph "
        "needs its composite version",
        node.name()));
  std::vector<Tensor> grads = node.backward(grad);
  if (!options.retain_graph) node.release_saved();
  if (grads.size() != node.next.size())
    throw AutogradError(fmt::format("{}: returned {} gradients for {} inputs", node.name(),
                                    grads.size(), node.next.size()));
  return grads;
}

// One node's backward (the view shortcut or its formula), seen by the inspect tools that are on:
// the trace, the profiler, the memory ledger (core/inspect/instrument.h; off, one atomic load).
std::vector<Tensor> run_backward(Graph& graph, Node& node, const Tensor& grad,
                                 const Options& options) {
  inspect::NodeWatch watch(node, grad);
  std::vector<Tensor> grads;  // stays empty if the view shortcut ran
  if (!try_backward_into(graph, node, grad, options)) grads = call_backward(node, grad, options);
  watch.done(grads);
  return grads;
}

bool has_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return false;
  Tensor c = t.detach().contiguous();
  return dispatch_floating(c.dtype(), "anomaly", [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i)
      if (!std::isfinite(static_cast<double>(p[i]))) return true;
    return false;
  });
}

// Gradient i of `node`, checked and summed down to the input's shape: the one place where
// broadcasting is undone.
Tensor input_gradient(const Node& node, size_t i, Tensor g) {
  if (!g.defined()) return g;
  if (g.dtype() != node.input_dtypes[i])
    throw AutogradError(fmt::format("{}: gradient {} has dtype {} but the input is {}", node.name(),
                                    i, dtype_name(g.dtype()), dtype_name(node.input_dtypes[i])));
  if (g.shape() != node.input_shapes[i]) g = sum_to(g, node.input_shapes[i]);
  if (anomaly_checks_enabled() && has_non_finite(g)) on_non_finite_gradient(node, i, g);
  return g;
}

// --- the loop ----------------------------------------------------------------------------------

// Runs the graph below `outputs`. Gradients arriving at `options.capture` nodes are returned
// (autograd::grad); otherwise AccumulateGrad nodes add them into the leaves' .grad.
std::unordered_map<Node*, Tensor> run_engine(const std::vector<Tensor>& outputs,
                                             const std::vector<Tensor>& grad_outputs,
                                             const Options& options) {
  std::vector<std::shared_ptr<Node>> roots = root_nodes(outputs, grad_outputs);
  Graph graph = count_dependencies(roots);
  prune_for_capture(graph, roots, options.capture);
  ReadyQueue ready;
  for (size_t i = 0; i < roots.size(); ++i) {  // the outputs' gradients start the pass
    NodeTask& root = graph.at(roots[i].get());
    add_to_buffer(root.grad, output_gradient(outputs, grad_outputs, i));
    if (--root.dependencies == 0) ready.push(roots[i].get());
  }

  EnableGradGuard grad_mode(options.create_graph);
  std::unordered_map<Node*, Tensor> captured;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    NodeTask& task = graph.at(node);
    Tensor grad = std::move(task.grad);  // complete: every consumer has sent its part
    std::vector<Tensor> grads;           // stays empty if the node does not run
    if (grad.defined()) {
      grad = run_pre_hooks(*node, grad);
      if (options.capture.count(node)) captured[node] = grad;
      if (task.runs) grads = run_backward(graph, *node, grad, options);
    }
    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* input = node->next[i].fn.get();
      if (!input) continue;
      NodeTask& to = graph.at(input);
      if (i < grads.size() && to.receives)
        add_to_buffer(to.grad, input_gradient(*node, i, grads[i]));
      if (--to.dependencies == 0) ready.push(input);
    }
  }
  return captured;
}

}  // namespace

namespace autograd {

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  inspect::PauseCutRecording not_the_forward;  // backward formulas are not cuts (inspect/cuts.h)
  const std::unordered_set<Node*> no_capture;
  run_engine(outputs, grad_outputs, {retain_graph || create_graph, create_graph, no_capture});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  inspect::PauseCutRecording not_the_forward;
  std::unordered_set<Node*> capture;
  std::vector<std::shared_ptr<Node>> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad())
      throw AutogradError(fmt::format("grad: input {} (shape {}) does not require grad", i,
                                      shape_str(inputs[i].shape())));
    targets.push_back(gradient_edge(inputs[i]));
    capture.insert(targets.back().get());
  }
  auto captured =
      run_engine(outputs, grad_outputs, {retain_graph || create_graph, create_graph, capture});
  std::vector<Tensor> result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto it = captured.find(targets[i].get());
    if (it == captured.end()) {
      if (!allow_unused)
        throw AutogradError(
            fmt::format("grad: input {} (shape {}) was not used to compute the outputs; pass "
                        "allow_unused=true",
                        i, shape_str(inputs[i].shape())));
      result.emplace_back();
      continue;
    }
    Tensor g = it->second;
    result.push_back(create_graph ? g : g.detach());
  }
  return result;
}

}  // namespace autograd
}  // namespace nabla
