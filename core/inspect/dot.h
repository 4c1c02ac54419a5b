// Graphviz DOT text for a Graph (graph.h). The text is a function of the graph alone (nodes in
// creation order, clusters in order of their first node), so a golden-file test can hold it.
//   - a node: its forward op, output shape and dtype, each saved tensor (name, shape, dtype,
//     bytes, or "released"), and the gradient norm when the graph has gradients;
//   - a leaf: an ellipse with its name (or "leaf") and shape;
//   - nodes recorded inside a module's forward sit in a cluster per module path, nested as the
//     forwards were called;
//   - collapse_depth = d >= 0: every module scope at call depth d (the root model is 0, what its
//     forward calls is 1, ...) becomes one box, with everything recorded below it inside.
#pragma once
#include <string>
#include <vector>

#include "nabla/core/inspect/graph.h"

namespace nabla::inspect {

struct DotOptions {
  int collapse_depth = -1;  // < 0: draw every node
  bool show_saved = true;   // list saved tensors in node labels
  std::string title;        // drawn above the graph when non-empty
};

std::string to_dot(const Graph& graph, const DotOptions& options = {});

// The module paths that become boxes at `depth`, in the order to_dot draws them.
std::vector<std::string> collapsed_scopes(const Graph& graph, int depth);

// "32 B", "1.5 KiB", "3.0 MiB".
std::string format_bytes(int64_t bytes);

}  // namespace nabla::inspect
