// Part 1 of the tour: out = softmax(Q K^T / sqrt(2)) V, loss = sum(out), with the numbers of
// docs/autograd.md section 8 (derived by hand there). The graph the forward records, its
// picture, the backward pass node by node, and every gradient the engine passed along compared
// with central finite differences.
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <map>

#include "examples/autograd_tour/tour.h"
#include "nabla/core/inspect/dot.h"
#include "nabla/core/inspect/render.h"
#include "nabla/nabla.h"

namespace nabla::tour {
namespace {

std::string matrix_str(const Tensor& t) {
  const std::vector<double> v = t.to(kFloat64).contiguous().to_vector<double>();
  if (t.dim() == 0) return fmt::format("{:.5f}", v[0]);
  const int64_t cols = t.size(-1);
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % static_cast<size_t>(cols) == 0)
      s += i == 0 ? "[" : "], [";
    else
      s += ", ";
    s += fmt::format("{:.5f}", v[i]);
  }
  return s + "]]";
}

// One line per node: what it computes, its shape, where its inputs come from, what it saved.
void print_graph_summary(const inspect::Graph& g) {
  std::map<size_t, std::vector<size_t>> inputs;
  for (const inspect::GraphEdge& e : g.edges) inputs[e.to].push_back(e.from);
  auto label = [&](size_t id) {
    const inspect::GraphNode& n = g.nodes[id];
    return n.is_leaf ? n.leaf_name : fmt::format("#{} {}", id, n.op);
  };
  for (const inspect::GraphNode& n : g.nodes) {
    std::string line = fmt::format("  #{:<2} {:<8} {:<7}", n.id, n.is_leaf ? n.leaf_name : n.op,
                                   shape_str(n.shape));
    if (n.is_leaf) {
      line += "  leaf (requires grad), gradient into .grad by AccumulateGrad";
    } else {
      line += fmt::format("  {} <-", n.name);
      for (size_t from : inputs[n.id]) line += " " + label(from) + ",";
      line.pop_back();
      for (const inspect::SavedTensorInfo& s : n.saved)
        line += fmt::format("  saves {} {}", s.name, inspect::format_bytes(s.bytes));
    }
    fmt::print("{}\n", line);
  }
}

// d f / d x by central differences, element by element (float64, x unchanged).
Tensor finite_difference(const std::function<double(const Tensor&)>& f, const Tensor& x) {
  const double h = 1e-6;
  std::vector<double> values = x.contiguous().to_vector<double>(), grad(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double saved = values[i];
    values[i] = saved + h;
    const double up = f(from_vector(values, x.shape()));
    values[i] = saved - h;
    const double down = f(from_vector(values, x.shape()));
    values[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return from_vector(grad, x.shape());
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  return max(abs(sub(a, b))).item();
}

}  // namespace

WorkedExampleResult worked_example(const std::string& out_dir) {
  WorkedExampleResult result;
  fmt::print("== Part 1: the worked example of docs/autograd.md section 8 ==\n\n");
  Tensor Q = tensor({{1, 0}, {0, 1}}, kFloat64).requires_grad_();
  Tensor K = tensor({{1, 2}, {3, 4}}, kFloat64).requires_grad_();
  Tensor V = tensor({{5, 6}, {7, 8}}, kFloat64).requires_grad_();

  // The forward: each line records one node (K.t() is a view; its node is PermuteBackward).
  Tensor Kt = K.t();
  Tensor scores = matmul(Q, Kt);
  Tensor scaled = div(scores, std::sqrt(2.0));
  Tensor weights = softmax(scaled, -1);
  Tensor out = matmul(weights, V);
  Tensor loss = sum(out);
  result.loss = loss.item();
  fmt::print(
      "forward:\n  weights = softmax(Q K^T / sqrt 2) = {}\n  out = weights V = {}\n"
      "  loss = sum(out) = {:.4f}\n\n",
      matrix_str(weights), matrix_str(out), result.loss);

  // The graph below the loss, as a value, as text and as pictures.
  const inspect::Graph graph =
      inspect::export_graph({loss}, {.names = {{"Q", Q}, {"K", K}, {"V", V}}});
  result.graph_nodes = graph.nodes.size();
  fmt::print("the graph the forward recorded ({} nodes, forward order; saved tensors hold {}):\n",
             graph.nodes.size(), inspect::format_bytes(graph.saved_bytes()));
  print_graph_summary(graph);
  const std::string dot =
      inspect::to_dot(graph, {.title = "loss = sum(softmax(Q K^T / sqrt 2) V)"});
  for (const char* ext : {"dot", "svg", "png"})
    inspect::write_graph(dot, fmt::format("{}/graph.{}", out_dir, ext));
  fmt::print("wrote {0}/graph.dot, {0}/graph.svg and {0}/graph.png\n\n", out_dir);

  // The backward, traced node by node in the order the engine runs them; the probe keeps the
  // norm of the gradient each node received, for a second picture.
  inspect::GradientProbe probe({loss});
  inspect::BackwardTrace tracer({.keep_gradients = true});
  loss.backward();
  const inspect::Trace trace = tracer.stop();
  fmt::print("the backward, in engine order (docs/autograd.md section 8 derives each row):\n{}\n",
             trace.table());
  const inspect::Graph after =
      inspect::export_graph({loss}, {.names = {{"Q", Q}, {"K", K}, {"V", V}}, .gradients = &probe});
  const std::string dot_after = inspect::to_dot(
      after, {.title = "after the backward: saved tensors released, |gradient| on each edge"});
  for (const char* ext : {"svg", "png"})
    inspect::write_graph(dot_after, fmt::format("{}/graph_backward.{}", out_dir, ext));
  fmt::print("wrote {0}/graph_backward.svg and .png: the same graph with each gradient's norm\n\n",
             out_dir);

  // Each node received d loss / d (its output). Recompute every one of them numerically: the
  // loss as a function of that tensor alone, the rest of the graph held fixed.
  NoGradGuard no_grad;
  const Tensor q = Q.detach(), k = K.detach(), v = V.detach();
  auto from_scores = [&](const Tensor& m) {
    return sum(matmul(softmax(div(m, std::sqrt(2.0)), -1), v)).item();
  };
  struct Probe {
    std::string tensor;
    Tensor value;
    std::function<double(const Tensor&)> loss_of;
  };
  std::map<uint64_t, Probe> probes;  // by the sequence number of the node that receives it
  auto watch = [&](const std::string& name, const Tensor& t,
                   std::function<double(const Tensor&)> f) {
    probes[gradient_edge(t)->sequence_nr()] = {name, t.detach(), std::move(f)};
  };
  watch("loss", loss, [](const Tensor& l) { return l.item(); });
  watch("out", out, [](const Tensor& o) { return sum(o).item(); });
  watch("weights", weights, [&](const Tensor& w) { return sum(matmul(w, v)).item(); });
  watch("scaled", scaled, [&](const Tensor& s) { return sum(matmul(softmax(s, -1), v)).item(); });
  watch("scores", scores, from_scores);
  watch("K^T", Kt, [&](const Tensor& kt) { return from_scores(matmul(q, kt)); });
  watch("Q", Q, [&](const Tensor& x) { return from_scores(matmul(x, k.t())); });
  watch("K", K, [&](const Tensor& x) { return from_scores(matmul(q, x.t())); });
  watch("V", V, [&](const Tensor& x) {
    return sum(matmul(softmax(div(matmul(q, k.t()), std::sqrt(2.0)), -1), x)).item();
  });

  fmt::print("every gradient against central finite differences (h = 1e-6):\n");
  fmt::print("  {:>2}  {:<16} {:<18} {:<44} {:>10}\n", "#", "node", "received", "value",
             "max |err|");
  for (const inspect::TraceRecord& r : trace.nodes) {
    auto it = probes.find(r.sequence_nr);
    if (it == probes.end()) throw Error("autograd_tour: no probe for node " + r.node);
    const Probe& p = it->second;
    const Tensor numeric = finite_difference(p.loss_of, p.value);
    const double err = max_abs_diff(r.grad, numeric);
    result.max_abs_error = std::max(result.max_abs_error, err);
    ++result.gradients_checked;
    fmt::print("  {:>2}  {:<16} {:<18} {:<44} {:>10.2e}\n", r.index, r.node,
               "d loss / d " + p.tensor, matrix_str(r.grad), err);
  }
  // The leaves' .grad is what their AccumulateGrad received.
  for (const auto& [name, leaf] : {std::pair{"Q", Q}, {"K", K}, {"V", V}})
    fmt::print("  {}.grad = {}\n", name, matrix_str(leaf.grad()));
  fmt::print("{} gradients checked, max abs error {:.2e}\n\n", result.gradients_checked,
             result.max_abs_error);
  return result;
}

}  // namespace nabla::tour
