// The backward engine. One pass, no recursion:
//   1. iterative DFS from the roots gives a post-order; its reverse is a topological order
//      (every node comes after all nodes that feed it a gradient);
//   2. for autograd::grad, nodes that cannot reach a requested input are pruned;
//   3. nodes run in that order: pre-hooks, backward, then each input gradient is summed down to
//      the input's shape (broadcasting undone here, once) and added to the next node's buffer.
#include <fmt/format.h>

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/autograd.h"
#include "core/broadcast.h"
#include "core/error.h"

namespace nabla {
namespace {

// Adds g into a node's pending gradient. Outside grad mode a buffer nobody else can see is added
// into in place (a contiguous one, so the add streams); otherwise a new sum is made (recorded
// under create_graph).
void accumulate(Tensor& buf, const Tensor& g) {
  if (!buf.defined()) {
    buf = g;
  } else if (!GradMode::enabled() && buf.is_contiguous() && exclusively_owned(buf)) {
    grad_add_(buf, g);
  } else {
    buf = grad_sum(buf, g);
  }
}

std::vector<Node*> topological_order(const std::vector<Node*>& roots) {
  std::vector<Node*> post;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  for (Node* r : roots) {
    if (!r || !seen.insert(r).second) continue;
    stack.emplace_back(r, 0);
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->next.size()) {
        Node* child = n->next[i++].fn.get();
        if (child && seen.insert(child).second) stack.emplace_back(child, 0);
      } else {
        post.push_back(n);
        stack.pop_back();
      }
    }
  }
  return {post.rbegin(), post.rend()};
}

bool has_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return false;
  Tensor c = t.detach().contiguous();
  return dispatch_float(c.dtype(), "anomaly", [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i)
      if (!std::isfinite(p[i])) return true;
    return false;
  });
}

Tensor default_grad_output(const Tensor& out) {
  if (out.numel() != 1)
    throw AutogradError(fmt::format(
        "backward: grad can be implicitly created only for scalar outputs; the output has shape "
        "{}, pass a gradient of that shape",
        shape_str(out.shape())));
  return ones(out.shape(), out.dtype());
}

// Runs the graph below `outputs`. With `capture` non-empty, gradients arriving at those nodes
// are returned instead of being accumulated into leaves, and unrelated nodes are skipped.
std::unordered_map<Node*, Tensor> run_engine(const std::vector<Tensor>& outputs,
                                             const std::vector<Tensor>& grad_outputs,
                                             bool retain_graph, bool create_graph,
                                             const std::unordered_set<Node*>& capture) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw ValueError(
        fmt::format("backward: {} outputs but {} gradients", outputs.size(), grad_outputs.size()));
  std::unordered_map<Node*, Tensor> buffers;
  std::vector<Node*> roots;
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.requires_grad())
      throw AutogradError(
          fmt::format("backward: output {} (shape {}) does not require grad and has no grad_fn", i,
                      shape_str(out.shape())));
    Tensor g = i < grad_outputs.size() && grad_outputs[i].defined() ? grad_outputs[i]
                                                                    : default_grad_output(out);
    if (g.shape() != out.shape())
      throw ShapeError(fmt::format("backward: gradient of shape {} for an output of shape {}",
                                   shape_str(g.shape()), shape_str(out.shape())));
    std::shared_ptr<Node> root = gradient_edge(out);
    keep_alive.push_back(root);
    accumulate(buffers[root.get()], g);
    roots.push_back(root.get());
  }

  std::vector<Node*> order = topological_order(roots);
  const bool capturing = !capture.empty();
  std::unordered_set<Node*> needed;
  if (capturing) {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // children first
      Node* n = *it;
      bool need = capture.count(n) > 0;
      for (const Edge& e : n->next) need = need || (e.fn && needed.count(e.fn.get()));
      if (need) needed.insert(n);
    }
  }

  EnableGradGuard grad_mode(create_graph);
  std::unordered_map<Node*, Tensor> captured;
  for (Node* node : order) {
    auto found = buffers.find(node);
    if (found == buffers.end()) continue;  // no gradient reached this node
    Tensor grad = std::move(found->second);
    buffers.erase(found);
    for (const GradHook& hook : node->pre_hooks) {
      Tensor replaced = hook(grad);
      if (replaced.defined()) grad = replaced;
    }
    if (capturing) {
      if (capture.count(node)) captured[node] = grad;
      bool descend = false;
      for (const Edge& e : node->next) descend = descend || (e.fn && needed.count(e.fn.get()));
      if (!descend) continue;
    } else if (dynamic_cast<AccumulateGrad*>(node) == nullptr && node->next.empty()) {
      continue;
    }
    if (create_graph && !node->backward_is_differentiable())
      throw AutogradError(fmt::format(
          "{}: this op's backward is a fused kernel that is not differentiable; create_graph "
          "needs its composite version",
          node->name()));

    // A view node may add its gradient straight into its input's pending buffer.
    if (!create_graph && !AnomalyMode::enabled() && node->next.size() == 1 && node->next[0].fn &&
        (!capturing || needed.count(node->next[0].fn.get()))) {
      auto pending = buffers.find(node->next[0].fn.get());
      if (pending != buffers.end() && pending->second.is_contiguous() &&
          exclusively_owned(pending->second) && node->backward_into(grad, pending->second)) {
        if (!retain_graph) node->release_saved();
        continue;
      }
    }
    std::vector<Tensor> grads = node->backward(grad);
    if (!retain_graph) node->release_saved();
    if (grads.size() != node->next.size() && !dynamic_cast<AccumulateGrad*>(node))
      throw AutogradError(fmt::format("{}: returned {} gradients for {} inputs", node->name(),
                                      grads.size(), node->next.size()));

    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* child = node->next[i].fn.get();
      if (!child || !grads[i].defined()) continue;
      if (capturing && !needed.count(child)) continue;
      Tensor g = grads[i];
      if (g.dtype() != node->input_dtypes[i])
        throw AutogradError(fmt::format("{}: gradient {} has dtype {} but the input is {}",
                                        node->name(), i, dtype_name(g.dtype()),
                                        dtype_name(node->input_dtypes[i])));
      if (g.shape() != node->input_shapes[i]) g = sum_to(g, node->input_shapes[i]);
      if (AnomalyMode::enabled() && has_non_finite(g))
        throw AutogradError(fmt::format(
            "anomaly: {} (forward op '{}', sequence #{}) produced a non-finite gradient for its "
            "input {} of shape {}",
            node->name(), node->forward_op(), node->sequence_nr(), i, shape_str(g.shape())));
      accumulate(buffers[child], g);
    }
  }
  return captured;
}

}  // namespace

namespace autograd {

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  run_engine(outputs, grad_outputs, retain_graph || create_graph, create_graph, {});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
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
      run_engine(outputs, grad_outputs, retain_graph || create_graph, create_graph, capture);
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
