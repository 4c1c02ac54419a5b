// export_graph and GradientProbe (see graph.h).
#include "nabla/core/inspect/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_set>

#include "nabla/core/autograd.h"
#include "nabla/core/copy.h"
#include "nabla/core/error.h"

namespace nabla::inspect {

namespace {

// The nodes below `outputs` (each output's grad_fn, or its leaf accumulator), in creation order,
// each claimed for this thread in `uses` (core/graph_use.h). Throws if an output has no graph, or
// if another thread is running or inspecting one of the nodes.
std::vector<std::shared_ptr<Node>> reachable_nodes(const char* caller,
                                                   const std::vector<Tensor>& outputs,
                                                   std::vector<Node*>* roots,
                                                   std::vector<NodeUse>& uses) {
  if (outputs.empty()) throw ValueError(fmt::format("{}: no outputs given", caller));
  std::vector<std::shared_ptr<Node>> found;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  auto claim = [&](Node& n) { uses.emplace_back().claim(n, caller); };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.defined()) throw ValueError(fmt::format("{}: output {} is undefined", caller, i));
    if (!out.requires_grad())
      throw AutogradError(fmt::format(
          "{}: output {} (shape {}, {}) has no autograd graph: it does not require grad (made "
          "under NoGradGuard, detached, or from tensors that do not require grad)",
          caller, i, shape_str(out.shape()), dtype_name(out.dtype())));
    std::shared_ptr<Node> root = gradient_edge(out);
    if (roots) roots->push_back(root.get());
    if (seen.insert(root.get()).second) {
      claim(*root);
      found.push_back(root);
      stack.push_back(root.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next)
      if (e.fn && seen.insert(e.fn.get()).second) {
        claim(*e.fn);
        found.push_back(e.fn);
        stack.push_back(e.fn.get());
      }
  }
  // Creation order, except that a leaf's accumulator (made lazily, just after the node that first
  // reads it) goes right before that node: inputs are listed before what uses them.
  std::unordered_map<const Node*, uint64_t> first_reader;
  for (const auto& n : found)
    for (const Edge& e : n->next)
      if (e.fn && dynamic_cast<const AccumulateGrad*>(e.fn.get())) {
        auto [it, added] = first_reader.try_emplace(e.fn.get(), n->sequence_nr());
        if (!added) it->second = std::min(it->second, n->sequence_nr());
      }
  auto key = [&](const Node* n) {
    auto it = first_reader.find(n);
    return it == first_reader.end() ? std::make_tuple(n->sequence_nr(), 1, n->sequence_nr())
                                    : std::make_tuple(it->second, 0, n->sequence_nr());
  };
  std::sort(found.begin(), found.end(),
            [&](const auto& a, const auto& b) { return key(a.get()) < key(b.get()); });
  return found;
}

std::vector<SavedTensorInfo> saved_info(const Node& node) {
  std::vector<SavedTensorInfo> out;
  const auto& saved = node.saved_tensors();
  for (size_t i = 0; i < saved.size(); ++i) {
    const SavedTensor& s = *saved[i];
    const TensorImpl* held = s.peek().get();
    if (!held && !s.released()) continue;  // this call had nothing to save there
    SavedTensorInfo info;
    info.name = s.name() ? s.name() : fmt::format("saved{}", i);
    info.released = s.released();
    if (held) {
      info.shape = held->shape;
      info.dtype = held->dtype;
      info.bytes = shape_numel(held->shape) * static_cast<int64_t>(dtype_size(held->dtype));
    }
    out.push_back(std::move(info));
  }
  return out;
}

// Records the gradient norm of one node; removed by the probe's destructor (found by type).
struct ProbeHook {
  std::shared_ptr<GradientProbe::Norms> norms;
  const Node* node;
  Tensor operator()(const Tensor& grad) const;
};

}  // namespace

struct GradientProbe::Norms {
  std::unordered_map<const Node*, double> by_node;
};

Tensor ProbeHook::operator()(const Tensor& grad) const {
  norms->by_node[node] = l2_norm(grad);
  return Tensor();  // keep the gradient as it is
}

double l2_norm(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()))
    throw DTypeError("l2_norm: expects a defined floating tensor");
  Tensor c = empty(t.shape(), kFloat64);
  copy_kernel(c, t);  // not recorded: no graph, no cut notes
  const double* p = c.data_ptr<double>();
  double sum = 0;
  for (int64_t i = 0; i < c.numel(); ++i) sum += p[i] * p[i];
  return std::sqrt(sum);
}

int64_t Graph::saved_bytes() const {
  int64_t total = 0;
  for (const GraphNode& n : nodes)
    for (const SavedTensorInfo& s : n.saved)
      if (!s.released) total += s.bytes;
  return total;
}

Graph export_graph(const std::vector<Tensor>& outputs, const GraphOptions& options) {
  std::vector<Node*> roots;
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<NodeUse> uses;  // held until the graph has been read, released before `nodes`
  nodes = reachable_nodes("export_graph", outputs, &roots, uses);
  std::unordered_map<const Node*, size_t> id;
  for (size_t i = 0; i < nodes.size(); ++i) id[nodes[i].get()] = i;
  std::unordered_map<const TensorImpl*, std::string> leaf_names;
  for (const auto& [name, t] : options.names)
    if (t.defined()) leaf_names.try_emplace(t.impl_ptr().get(), name);

  Graph g;
  g.has_gradients = options.gradients != nullptr;
  g.nodes.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = *nodes[i];
    GraphNode& out = g.nodes[i];
    out.id = i;
    out.name = n.name();
    out.scope = n.module_scope;
    out.saved = saved_info(n);
    if (options.gradients) out.grad_norm = options.gradients->norm(&n);
    if (const auto* acc = dynamic_cast<const AccumulateGrad*>(&n)) {
      out.is_leaf = true;
      out.op = "leaf";
      out.shape_known = true;
      out.shape = acc->leaf()->shape;
      out.dtype = acc->leaf()->dtype;
      if (auto it = leaf_names.find(acc->leaf().get()); it != leaf_names.end())
        out.leaf_name = it->second;
      else
        out.scope = nullptr;  // an input from outside: its accumulator's scope is only where
                              // it happened to be read first
    } else {
      out.op = n.forward_op();
    }
    // An input's shape is the shape of the node feeding it: edges carry the output shapes.
    for (size_t k = 0; k < n.next.size(); ++k) {
      if (!n.next[k].fn) continue;
      const size_t from = id.at(n.next[k].fn.get());
      g.edges.push_back({from, i, k});
      GraphNode& producer = g.nodes[from];
      if (!producer.shape_known) {
        producer.shape_known = true;
        producer.shape = n.input_shapes[k];
        producer.dtype = n.input_dtypes[k];
      }
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const size_t root = id.at(roots[i]);
    g.outputs.push_back(root);
    GraphNode& r = g.nodes[root];
    if (!r.is_leaf) {
      r.shape_known = true;
      r.shape = outputs[i].shape();
      r.dtype = outputs[i].dtype();
    }
  }
  return g;
}

// ----------------------------------------------------------------------------
// GradientProbe

GradientProbe::GradientProbe(const std::vector<Tensor>& outputs)
    : norms_(std::make_shared<Norms>()) {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<NodeUse> uses;  // released before `nodes`
  nodes = reachable_nodes("GradientProbe", outputs, nullptr, uses);
  for (const auto& node : nodes) {
    node->pre_hooks.push_back(ProbeHook{norms_, node.get()});
    hooked_.push_back(node);
  }
}

GradientProbe::~GradientProbe() {
  for (const auto& weak : hooked_) {
    auto node = weak.lock();
    NodeUse use;
    // A node another thread's backward is running keeps the hook: it only writes into norms_,
    // which the hook co-owns.
    if (!node || !use.try_claim(*node)) continue;
    auto& hooks = node->pre_hooks;
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                               [&](const GradHook& h) {
                                 const auto* p = h.target<ProbeHook>();
                                 return p && p->norms == norms_;
                               }),
                hooks.end());
  }
}

std::optional<double> GradientProbe::norm(const Node* node) const {
  auto it = norms_->by_node.find(node);
  if (it == norms_->by_node.end()) return std::nullopt;
  return it->second;
}

}  // namespace nabla::inspect
