// Graph export (core/inspect/graph.h), its DOT text (dot.h) and Graphviz rendering (render.h) on
// the worked example softmax(Q K^T / sqrt(2)) V with Q = [[1,0],[0,1]], K = [[1,2],[3,4]],
// V = [[5,6],[7,8]] (the scaling note's example; tests/nn/test_attention_worked_examples.cpp).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "nabla/core/inspect/dot.h"
#include "nabla/core/inspect/graph.h"
#include "nabla/core/inspect/render.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

struct WorkedExample {
  Tensor Q = tensor({{1, 0}, {0, 1}}, kFloat64).requires_grad_();
  Tensor K = tensor({{1, 2}, {3, 4}}, kFloat64).requires_grad_();
  Tensor V = tensor({{5, 6}, {7, 8}}, kFloat64).requires_grad_();
  Tensor scores = div(matmul(Q, K.t()), std::sqrt(2.0));
  Tensor weights = softmax(scores, -1);
  Tensor out = matmul(weights, V);
  inspect::GraphOptions names() const { return {{{"Q", Q}, {"K", K}, {"V", V}}, nullptr}; }
};

std::string golden_path(const std::string& name) {
  return std::string(NABLA_FIXTURE_DIR) + "/../golden/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// NABLA_UPDATE_GOLDEN=1 rewrites the file instead of comparing (then review the diff).
void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = golden_path(name);
  if (const char* update = std::getenv("NABLA_UPDATE_GOLDEN"); update && std::string(update) == "1")
    std::ofstream(path, std::ios::binary) << actual;
  const std::string expected = read_file(path);
  INFO("golden file " << path << " (NABLA_UPDATE_GOLDEN=1 rewrites it)\n" << actual);
  CHECK(actual == expected);
}

size_t count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("export_graph: the worked example's nodes, shapes, saved tensors and edges",
          "[core][inspect]") {
  WorkedExample ex;
  inspect::Graph g = inspect::export_graph({ex.out}, ex.names());
  // Forward order, each leaf right before the first node that reads it (K.t() is a permute).
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.is_leaf ? n.leaf_name : n.op);
  CHECK(ops ==
        std::vector<std::string>{"K", "permute", "Q", "matmul", "div", "softmax", "V", "matmul"});
  REQUIRE(g.outputs.size() == 1);
  const inspect::GraphNode& out = g.nodes[g.outputs[0]];
  CHECK(out.op == "matmul");
  CHECK(out.shape == Shape{2, 2});
  CHECK(out.dtype == kFloat64);
  // The last matmul saves both operands: 4 float64 values each.
  REQUIRE(out.saved.size() == 2);
  CHECK(out.saved[0].name == "a");
  CHECK(out.saved[0].bytes == 32);
  CHECK_FALSE(out.saved[0].released);
  for (const auto& n : g.nodes) CHECK(n.shape_known);
  // Every non-leaf node has one edge per input that needs a gradient.
  CHECK(g.edges.size() == 7);
  CHECK(g.saved_bytes() > 0);
}

TEST_CASE("to_dot: golden file for the worked example", "[core][inspect]") {
  WorkedExample ex;
  inspect::Graph g = inspect::export_graph({ex.out}, ex.names());
  check_golden("attention_worked_example.dot", inspect::to_dot(g));
}

TEST_CASE(
    "to_dot: after backward the saved tensors show as released and edges carry gradient "
    "norms",
    "[core][inspect]") {
  WorkedExample ex;
  Tensor loss = sum(ex.out);
  inspect::GradientProbe probe({loss});
  loss.backward();
  inspect::GraphOptions options = ex.names();
  options.gradients = &probe;
  inspect::Graph g = inspect::export_graph({loss}, options);
  for (const auto& n : g.nodes)
    for (const auto& s : n.saved) CHECK(s.released);
  // A leaf's recorded norm is the norm of the gradient it received: its .grad here.
  for (const auto& n : g.nodes) {
    if (!n.is_leaf) continue;
    const Tensor& leaf = n.leaf_name == "Q" ? ex.Q : n.leaf_name == "K" ? ex.K : ex.V;
    REQUIRE(n.grad_norm);
    CHECK(*n.grad_norm == Approx(std::sqrt(sum(mul(leaf.grad(), leaf.grad())).item())));
  }
  const std::string dot = inspect::to_dot(g);
  CHECK_THAT(dot, Contains("released"));
  CHECK_THAT(dot, Contains("|grad|"));
}

TEST_CASE("GradientProbe: node norms equal autograd::grad of the intermediate tensors",
          "[core][inspect]") {
  WorkedExample ex;
  Tensor loss = sum(mul(ex.out, ex.out));
  inspect::GradientProbe probe({loss});
  auto expected = autograd::grad({loss}, {ex.scores, ex.weights}, {}, /*retain_graph=*/true);
  loss.backward();
  auto norm = [](const Tensor& t) { return std::sqrt(sum(mul(t, t)).item()); };
  REQUIRE(probe.norm(ex.scores.grad_fn().get()));
  CHECK(*probe.norm(ex.scores.grad_fn().get()) == Approx(norm(expected[0])));
  CHECK(*probe.norm(ex.weights.grad_fn().get()) == Approx(norm(expected[1])));
}

TEST_CASE("GradientProbe removes its hooks when destroyed", "[core][inspect]") {
  WorkedExample ex;
  const size_t before = ex.out.grad_fn()->pre_hooks.size();
  {
    inspect::GradientProbe probe({ex.out});
    CHECK(ex.out.grad_fn()->pre_hooks.size() == before + 1);
  }
  CHECK(ex.out.grad_fn()->pre_hooks.size() == before);
}

TEST_CASE("render_dot: SVG through gvc parses as XML and holds every node", "[core][inspect]") {
  WorkedExample ex;
  inspect::Graph g = inspect::export_graph({ex.out}, ex.names());
  const std::string svg = inspect::render_dot(inspect::to_dot(g), "svg");
  // A simple well-formedness check: an XML declaration, one <svg> root, balanced <g> groups.
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(count(svg, "<svg[ >]") == 1);
  CHECK(count(svg, "</svg>") == 1);
  CHECK(count(svg, "<g[ >]") == count(svg, "</g>"));
  // Graphviz draws each node as <g id="nodeN" class="node"><title>nN</title>...
  CHECK(count(svg, "class=\"node\"") == g.nodes.size());
  for (const auto& n : g.nodes)
    CHECK_THAT(svg, Contains("<title>n" + std::to_string(n.id) + "</title>"));
  CHECK_THAT(svg, Contains("softmax"));
}

TEST_CASE("write_graph: PNG and SVG files; unwritable paths and unknown formats are clear errors",
          "[core][inspect]") {
  WorkedExample ex;
  const std::string dot = inspect::to_dot(inspect::export_graph({ex.out}, ex.names()));
  const auto dir = std::filesystem::temp_directory_path() / "nabla_inspect_graph_test";
  std::filesystem::create_directories(dir);
  const std::string png = (dir / "graph.png").string();
  inspect::write_graph(dot, png);
  const std::string bytes = read_file(png);
  REQUIRE(bytes.size() > 8);
  CHECK(bytes.substr(1, 3) == "PNG");
  inspect::write_graph(dot, (dir / "graph.dot").string());
  CHECK(read_file((dir / "graph.dot").string()) == dot);
  std::filesystem::remove_all(dir);

  CHECK_THROWS_AS(inspect::write_graph(dot, "/nonexistent-dir/graph.svg"), IOError);
  CHECK_THROWS_WITH(inspect::write_graph(dot, "/nonexistent-dir/graph.svg"),
                    Contains("/nonexistent-dir/graph.svg"));
  CHECK_THROWS_WITH(inspect::write_graph(dot, "graph_without_extension"), Contains("no extension"));
  CHECK_THROWS_AS(inspect::render_dot(dot, "no-such-format"), Error);
  CHECK_THROWS_WITH(inspect::render_dot(dot, "no-such-format"), Contains("'no-such-format'"));
  CHECK_THROWS_AS(inspect::render_dot("digraph { a -> ", "svg"), ValueError);
}

TEST_CASE("export_graph: an output without a graph is a clear error", "[core][inspect]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64);
  CHECK_THROWS_AS(inspect::export_graph({exp(x)}), AutogradError);
  CHECK_THROWS_WITH(inspect::export_graph({exp(x)}),
                    Contains("output 0") && Contains("(2,)") && Contains("does not require grad"));
  Tensor w = tensor({1.0}, kFloat64).requires_grad_();
  Tensor detached = mul(w, 2.0).detach();
  CHECK_THROWS_AS(inspect::export_graph({mul(w, 3.0), detached}), AutogradError);
  CHECK_THROWS_AS(inspect::export_graph({}), ValueError);
  CHECK_THROWS_AS(inspect::export_graph({Tensor()}), ValueError);
  // A leaf that requires grad is a graph of one node.
  inspect::Graph g = inspect::export_graph({w}, {{{"w", w}}, nullptr});
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].leaf_name == "w");
}

// Run by ctest graphviz_missing with GVBINDIR naming an empty directory (tests/CMakeLists.txt):
// gvc then finds none of its plugins, as on a machine where libgvc's plugins are not installed.
TEST_CASE("render_dot: Graphviz's plugins missing at run time is a clear Error", "[.no-graphviz]") {
  WorkedExample ex;
  const std::string dot = inspect::to_dot(inspect::export_graph({ex.out}, ex.names()));
  CHECK_THROWS_AS(inspect::render_dot(dot, "svg"), Error);
  CHECK_THROWS_WITH(inspect::render_dot(dot, "svg"),
                    Contains("'dot' layout") && Contains("scripts/setup.sh"));
  const auto dir = std::filesystem::temp_directory_path() / "nabla_no_graphviz_test";
  std::filesystem::create_directories(dir);
  CHECK_THROWS_AS(inspect::write_graph(dot, (dir / "graph.png").string()), Error);
  CHECK_FALSE(std::filesystem::exists(dir / "graph.png"));  // nothing half-written
  inspect::write_graph(dot, (dir / "graph.dot").string());  // the text needs no Graphviz
  CHECK(read_file((dir / "graph.dot").string()) == dot);
  std::filesystem::remove_all(dir);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
