// DOT text for an autograd graph (see dot.h).
#include "nabla/core/inspect/dot.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <variant>

#include "nabla/core/error.h"
#include "nabla/core/inspect/scope.h"

namespace nabla::inspect {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string norm_str(double v) {
  return std::isfinite(v) ? fmt::format("{:.4g}", v) : "non-finite";
}

std::string node_label(const GraphNode& n, const DotOptions& options, bool with_grad) {
  std::string label;
  if (n.is_leaf)
    label = n.leaf_name.empty() ? "leaf" : n.leaf_name;
  else
    label = n.op;
  if (n.shape_known) label += fmt::format("\n{} {}", shape_str(n.shape), dtype_name(n.dtype));
  if (options.show_saved)
    for (const SavedTensorInfo& s : n.saved) {
      if (s.released)
        label += fmt::format("\nsaved {}: released", s.name);
      else
        label += fmt::format("\nsaved {}: {} {}, {}", s.name, shape_str(s.shape),
                             dtype_name(s.dtype), format_bytes(s.bytes));
    }
  if (with_grad && n.grad_norm) label += "\n|grad| " + norm_str(*n.grad_norm);
  return label;
}

// A drawn vertex: one graph node, or one collapsed box standing for a module scope.
struct Vertex {
  std::string id;  // "n3", "box0"
  std::string attributes;
};

// A cluster for one module path, holding vertices and nested clusters in first-seen order.
struct Cluster {
  std::string path, type;
  std::vector<std::variant<size_t, Cluster*>> items;  // vertex index or child cluster
  std::map<std::string, std::unique_ptr<Cluster>> children;
};

// The chain of scopes from the root down to `s` (inclusive), cut below max_depth.
std::vector<const ModuleScope*> chain(const ModuleScope* s, int max_depth) {
  std::vector<const ModuleScope*> out;
  for (; s; s = s->parent.get())
    if (s->depth <= max_depth) out.insert(out.begin(), s);
  return out;
}

void emit_cluster(const Cluster& c, const std::vector<Vertex>& vertices, int indent,
                  int& next_cluster, std::string& out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  for (const auto& item : c.items) {
    if (const size_t* v = std::get_if<size_t>(&item)) {
      out += fmt::format("{}{} [{}];\n", pad, vertices[*v].id, vertices[*v].attributes);
      continue;
    }
    const Cluster& child = *std::get<Cluster*>(item);
    out += fmt::format("{}subgraph cluster_{} {{\n", pad, next_cluster++);
    out += fmt::format("{}  label=\"{} ({})\"; style=\"rounded\"; color=\"#8899aa\";\n", pad,
                       escape(child.path.empty() ? "<root>" : child.path), escape(child.type));
    emit_cluster(child, vertices, indent + 2, next_cluster, out);
    out += pad + "}\n";
  }
}

struct Layout {
  std::vector<Vertex> vertices;
  std::vector<size_t> vertex_of;   // graph node id -> vertex index
  std::vector<std::string> boxes;  // collapsed scope paths, by box number
  Cluster top;
};

Layout lay_out(const Graph& g, const DotOptions& options) {
  Layout L;
  const bool collapsing = options.collapse_depth >= 0;
  struct Box {
    size_t vertex;
    std::string type;
    size_t nodes = 0;
    int64_t saved_bytes = 0;
  };
  std::map<std::string, Box> boxes;  // by collapsed module path
  L.vertex_of.resize(g.nodes.size());
  auto place = [&](size_t vertex, const std::vector<const ModuleScope*>& scopes) {
    Cluster* c = &L.top;
    for (const ModuleScope* s : scopes) {
      auto& child = c->children[s->path];
      if (!child) {
        child = std::make_unique<Cluster>();
        child->path = s->path;
        child->type = s->type;
        c->items.emplace_back(child.get());
      }
      c = child.get();
    }
    c->items.emplace_back(vertex);
  };
  for (const GraphNode& n : g.nodes) {
    const ModuleScope* s = n.scope.get();
    if (collapsing && s && s->depth >= options.collapse_depth) {
      const ModuleScope* top = s->ancestor_at(options.collapse_depth);
      auto [it, added] = boxes.try_emplace(top->path, Box{L.vertices.size(), top->type});
      Box& box = it->second;
      if (added) {
        L.vertices.push_back({fmt::format("box{}", L.boxes.size()), ""});  // labelled below
        L.boxes.push_back(top->path);
        place(box.vertex, chain(top->parent.get(), options.collapse_depth - 1));
      }
      box.nodes += 1;
      for (const SavedTensorInfo& st : n.saved)
        if (!st.released) box.saved_bytes += st.bytes;
      L.vertex_of[n.id] = box.vertex;
      continue;
    }
    const size_t v = L.vertices.size();
    L.vertex_of[n.id] = v;
    bool is_output = false;
    for (size_t o : g.outputs) is_output = is_output || o == n.id;
    std::string fill = n.is_leaf ? "#dbeafe" : is_output ? "#fde68a" : "#f3f4f6";
    if (g.has_gradients && n.grad_norm && !std::isfinite(*n.grad_norm)) fill = "#fca5a5";
    std::string attrs =
        fmt::format("label=\"{}\"", escape(node_label(n, options, g.has_gradients)));
    if (n.is_leaf) attrs += ", shape=ellipse";
    if (is_output) attrs += ", peripheries=2";
    attrs += fmt::format(", fillcolor=\"{}\"", fill);
    L.vertices.push_back({fmt::format("n{}", n.id), attrs});
    place(v, s ? chain(s, options.collapse_depth < 0 ? s->depth : options.collapse_depth - 1)
               : std::vector<const ModuleScope*>{});
  }
  for (const auto& [path, box] : boxes) {
    const std::string label =
        fmt::format("{}\n{}\n{} nodes, saved {}", path.empty() ? "<root>" : path, box.type,
                    box.nodes, format_bytes(box.saved_bytes));
    L.vertices[box.vertex].attributes =
        fmt::format("label=\"{}\", shape=box3d, fillcolor=\"#e9d5ff\"", escape(label));
  }
  return L;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const double kib = static_cast<double>(bytes) / 1024.0;
  if (kib < 1024) return fmt::format("{:.1f} KiB", kib);
  const double mib = kib / 1024.0;
  if (mib < 1024) return fmt::format("{:.1f} MiB", mib);
  return fmt::format("{:.2f} GiB", mib / 1024.0);
}

std::vector<std::string> collapsed_scopes(const Graph& graph, int depth) {
  if (depth < 0) return {};
  DotOptions options;
  options.collapse_depth = depth;
  return lay_out(graph, options).boxes;
}

std::string to_dot(const Graph& g, const DotOptions& options) {
  if (g.nodes.empty()) throw ValueError("to_dot: the graph has no nodes");
  Layout L = lay_out(g, options);
  std::string out = "digraph autograd {\n";
  out += "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=10, nodesep=0.25, ranksep=0.35";
  if (!options.title.empty())
    out += fmt::format(", label=\"{}\", labelloc=t", escape(options.title));
  out += "];\n";
  out += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [color=\"#555555\", fontname=\"Helvetica\", fontsize=9];\n";
  int next_cluster = 0;
  emit_cluster(L.top, L.vertices, 2, next_cluster, out);
  // Edges point the way data flows in the forward (inputs above, outputs below); a box stands for
  // all its nodes, and edges inside one box are not drawn.
  std::map<std::pair<size_t, size_t>, bool> drawn;
  for (const GraphEdge& e : g.edges) {
    const size_t from = L.vertex_of[e.from], to = L.vertex_of[e.to];
    const bool plain = L.vertices[from].id[0] == 'n' && L.vertices[to].id[0] == 'n';
    // A node may read one tensor twice (mul(x, x)): two edges. A box gets one edge per neighbour.
    if (from == to || (!plain && !drawn.emplace(std::make_pair(from, to), true).second)) continue;
    const GraphNode& producer = g.nodes[e.from];
    std::string attrs;
    if (g.has_gradients && plain && producer.grad_norm)
      attrs = fmt::format(" [label=\" {}\"]", norm_str(*producer.grad_norm));
    out += fmt::format("  {} -> {}{};\n", L.vertices[from].id, L.vertices[to].id, attrs);
  }
  out += "}\n";
  return out;
}

}  // namespace nabla::inspect
