// Module scopes (nn::RecordScopes): every node records the module whose forward created it, by
// its named_modules() path; graph export names leaves by named_parameters(); collapsing by depth
// turns a 2-layer TransformerEncoder into one box per layer.
#include <regex>

#include "nabla/core/inspect/scope.h"
#include "nabla/nn/inspect.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

std::string scope_of(const Tensor& t) {
  const auto& s = t.grad_fn()->module_scope;
  return s ? s->display() : "(none)";
}

size_t count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

std::shared_ptr<nn::TransformerEncoder> encoder(bool final_norm) {
  nn::TransformerEncoderLayerOptions o;
  o.d_model = 8;
  o.nhead = 2;
  o.dim_feedforward = 16;
  o.dropout = 0.0;
  o.batch_first = true;
  return std::make_shared<nn::TransformerEncoder>(o, 2, final_norm);
}

}  // namespace

TEST_CASE("RecordScopes: nodes record the module path they were created in", "[nn][inspect]") {
  auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4),
                                              std::make_shared<nn::Tanh>());
  Tensor x = randn({2, 3});
  {
    Tensor y = (*net)(x);
    CHECK(y.grad_fn()->module_scope == nullptr);  // off by default
  }
  nn::RecordScopes scopes(*net);
  CHECK(inspect::current_module_scope() == nullptr);  // only inside a forward
  Tensor h = (*net->at<nn::Linear>(0))(x);
  Tensor y = (*net)(x);
  Tensor loss = sum(y);
  CHECK(scope_of(h) == "0");  // called directly: the path is still its name in the model
  CHECK(scope_of(y) == "1");
  CHECK(loss.grad_fn()->module_scope == nullptr);  // outside every forward
  const auto& s = y.grad_fn()->module_scope;
  CHECK(s->type == "Tanh");
  CHECK(s->depth == 1);
  REQUIRE(s->parent);
  CHECK(s->parent->path.empty());
  CHECK(s->parent->type == "Sequential");
  CHECK(s->parent->depth == 0);
  // The same module called again from the same place reuses its record.
  CHECK((*net)(x).grad_fn()->module_scope == s);
}

TEST_CASE("RecordScopes: nested paths through an encoder, fused entry points included",
          "[nn][inspect]") {
  auto enc = encoder(false);
  nn::RecordScopes scopes(*enc);
  Tensor x = randn({2, 3, 8}).requires_grad_();
  Tensor y = (*enc)(x);
  inspect::Graph g = nn::export_graph({y}, *enc);
  std::set<std::string> paths;
  int max_depth = 0;
  for (const auto& n : g.nodes)
    if (n.scope) {
      paths.insert(n.scope->path);
      max_depth = std::max(max_depth, n.scope->depth);
    }
  for (const char* p : {"layers.0.self_attn", "layers.0.self_attn.out_proj", "layers.0.linear1",
                        "layers.0.linear2", "layers.0.norm1", "layers.1.norm2"})
    CHECK(paths.count(p) == 1);
  CHECK(max_depth == 3);  // encoder 0 -> layer 1 -> self_attn 2 -> out_proj 3
  // Leaves are named by named_parameters().
  std::set<std::string> leaves;
  for (const auto& n : g.nodes)
    if (n.is_leaf) leaves.insert(n.leaf_name);
  CHECK(leaves.count("layers.0.linear1.weight") == 1);
  CHECK(leaves.count("layers.1.self_attn.in_proj_weight") == 1);
  CHECK(leaves.count("") == 1);  // the input x has no name
}

TEST_CASE("to_dot: collapsing a 2-layer encoder by depth gives one box per layer",
          "[nn][inspect]") {
  auto enc = encoder(false);
  nn::RecordScopes scopes(*enc);
  Tensor x = randn({2, 3, 8}).requires_grad_();
  inspect::Graph g = nn::export_graph({sum((*enc)(x))}, *enc);
  REQUIRE(g.nodes.size() > 40);

  inspect::DotOptions by_layer;
  by_layer.collapse_depth = 1;
  const std::string dot = inspect::to_dot(g, by_layer);
  CHECK(count(dot, R"(\n\s*box\d+ \[)") == 2);
  CHECK(inspect::collapsed_scopes(g, 1) == std::vector<std::string>{"layers.0", "layers.1"});
  CHECK_THAT(dot, Contains("layers.0\\nTransformerEncoderLayer"));
  // Outside the boxes: the input leaf, the sum; box0 feeds box1.
  CHECK(count(dot, R"(\n\s*n\d+ \[)") == 2);
  CHECK_THAT(dot, Contains("box0 -> box1"));
  // depth 0: the whole encoder is one box; no collapsing: clusters, no boxes.
  CHECK(inspect::collapsed_scopes(g, 0) == std::vector<std::string>{""});
  const std::string full = inspect::to_dot(g);
  CHECK(count(full, R"(\n\s*box\d+ \[)") == 0);
  CHECK(count(full, R"(\n\s*n\d+ \[)") == g.nodes.size());
  CHECK_THAT(full, Contains("subgraph cluster_"));
  CHECK_THAT(full, Contains("label=\"layers.0.self_attn (MultiheadAttention)\""));
  // depth 2: one box per sub-module of each layer (self_attn, linear1, ...).
  CHECK(inspect::collapsed_scopes(g, 2).size() >= 8);

  // The collapsed picture renders through gvc with every box and node in it.
  const std::string svg = inspect::render_dot(dot, "svg");
  CHECK(count(svg, "class=\"node\"") == 4);
  CHECK_THAT(svg, Contains("<title>box1</title>"));
}

TEST_CASE("to_dot: the final norm is a third box", "[nn][inspect]") {
  auto enc = encoder(true);
  nn::RecordScopes scopes(*enc);
  Tensor y = (*enc)(randn({1, 2, 8}));
  inspect::Graph g = nn::export_graph({y}, *enc);
  CHECK(inspect::collapsed_scopes(g, 1) ==
        std::vector<std::string>{"layers.0", "layers.1", "norm"});
}

}  // namespace NABLA_UNITY_ID
}  // namespace
