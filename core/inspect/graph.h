// The autograd graph as a value: every node reachable from some outputs, with its op, output
// shape, module scope and saved tensors, the edges between them, and leaves named by the caller
// (nn/inspect.h names them by a model's named_parameters()). A GradientProbe, installed before a
// backward, adds the norm of the gradient each node received. dot.h draws the value; render.h
// turns the drawing into SVG or PNG.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::inspect {

struct ModuleScope;

struct SavedTensorInfo {
  std::string name;       // the field's name in the node ("x", "weight"), or "saved<i>"
  bool released = false;  // freed by a backward (shape and bytes are then unknown)
  Shape shape;
  DType dtype = kFloat32;
  int64_t bytes = 0;  // numel * element size of the saved view
};

struct GraphNode {
  size_t id = 0;     // position in Graph::nodes: the nodes sorted by creation (forward order)
  std::string name;  // "MatmulBackward", "AccumulateGrad"
  std::string op;    // the forward op ("matmul"); "leaf" for AccumulateGrad
  bool is_leaf = false;
  std::string leaf_name;     // the caller's name for this leaf ("" if none given)
  bool shape_known = false;  // the output's shape and dtype (the leaf's for AccumulateGrad)
  Shape shape;
  DType dtype = kFloat32;
  // The module whose forward recorded it (or null). A named leaf keeps the scope of its first
  // use (its module, for a parameter); an unnamed leaf (an input) has none.
  std::shared_ptr<const ModuleScope> scope;
  std::vector<SavedTensorInfo> saved;
  std::optional<double> grad_norm;  // |gradient of this node's output| seen by a GradientProbe
};

// A tensor flowing forward from node `from` (its output) into input `input` of node `to`.
struct GraphEdge {
  size_t from = 0;
  size_t to = 0;
  size_t input = 0;
};

struct Graph {
  std::vector<GraphNode> nodes;
  std::vector<GraphEdge> edges;  // sorted by (to, input)
  std::vector<size_t> outputs;   // the node of each output tensor, in the caller's order
  bool has_gradients = false;    // a probe was given (grad_norm is set where a gradient came)
  int64_t saved_bytes() const;   // sum over every unreleased saved tensor
};

class GradientProbe;

struct GraphOptions {
  // Names for leaves: a leaf tensor listed here is labelled with its name.
  std::vector<std::pair<std::string, Tensor>> names;
  const GradientProbe* gradients = nullptr;  // gradient norms seen by this probe
};

// The graph below `outputs`. Throws AutogradError naming the output if one has no graph (does not
// require grad), or naming the node if another thread's backward is running one
// (core/graph_use.h).
Graph export_graph(const std::vector<Tensor>& outputs, const GraphOptions& options = {});

// Watches every node below `outputs` through the node's gradient hooks (Node::pre_hooks, which
// the engine runs with the node's complete gradient) and keeps the gradient's L2 norm; removes
// its hooks when destroyed (except on a node another thread's backward is running: that hook
// stays, inert). Create it after the forward, before the backward; throws as export_graph.
class GradientProbe {
 public:
  explicit GradientProbe(const std::vector<Tensor>& outputs);
  ~GradientProbe();
  GradientProbe(const GradientProbe&) = delete;
  GradientProbe& operator=(const GradientProbe&) = delete;

  // The norm of the gradient `node`'s output received in the last backward (nullopt if none).
  std::optional<double> norm(const Node* node) const;

  struct Norms;  // shared with the hooks

 private:
  std::shared_ptr<Norms> norms_;
  std::vector<std::weak_ptr<Node>> hooked_;
};

// sqrt(sum of squares) in double, for floating tensors; NaN/Inf propagate.
double l2_norm(const Tensor& t);

}  // namespace nabla::inspect
