// The engine's execution order: a node runs once every consumer has sent its gradient (dependency
// counts), and among ready nodes the latest-created runs first (PyTorch's tie-break by sequence
// number). Hooks on non-leaf tensors record the order: a tensor's hook runs when its node runs.
#include <algorithm>
#include <fstream>
#include <map>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// Registers a hook on t that appends `name` to `order` and keeps the gradient it saw.
void record(const Tensor& t, const std::string& name, std::vector<std::string>& order,
            std::map<std::string, Tensor>* seen = nullptr) {
  t.register_hook([name, &order, seen](const Tensor& g) {
    order.push_back(name);
    if (seen) (*seen)[name] = g.detach().clone();
    return Tensor();
  });
}

}  // namespace

TEST_CASE("a diamond runs its shared node once, after both branches", "[core][engine]") {
  Tensor x = tensor({0.5, -1.0}, kFloat64).requires_grad_();
  Tensor a = mul(x, 2.0);
  Tensor b = exp(a);
  Tensor c = mul(a, a);
  Tensor d = add(b, c);
  std::vector<std::string> order;
  std::map<std::string, Tensor> seen;
  record(a, "a", order, &seen);
  record(b, "b", order, &seen);
  record(c, "c", order, &seen);
  record(d, "d", order, &seen);
  sum(d).backward();
  CHECK(order == std::vector<std::string>{"d", "c", "b", "a"});
  // a's gradient was complete when its node ran: both branches, d/da (e^a + a^2) = e^a + 2a.
  const std::vector<double> xs = {0.5, -1.0};
  const std::vector<double> ga = seen["a"].to_vector<double>();
  const std::vector<double> gx = x.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double av = 2.0 * xs[i];
    CHECK(ga[i] == Approx(std::exp(av) + 2.0 * av));
    CHECK(gx[i] == Approx(2.0 * (std::exp(av) + 2.0 * av)));
  }
}

TEST_CASE("ready nodes run latest-created first, where depth-first order differs",
          "[core][engine]") {
  // Two chains built interleaved. A depth-first search from the sum would finish one chain
  // before starting the other (b3 b2 b1 a3 a2 a1); the ready queue interleaves them by creation.
  Tensor x = tensor({1.0}, kFloat64).requires_grad_();
  Tensor a1 = mul(x, 2.0);
  Tensor b1 = mul(x, 3.0);
  Tensor a2 = mul(a1, 2.0);
  Tensor b2 = mul(b1, 3.0);
  Tensor a3 = mul(a2, 2.0);
  Tensor b3 = mul(b2, 3.0);
  std::vector<std::string> order;
  const std::vector<std::pair<Tensor, std::string>> named = {{a1, "a1"}, {b1, "b1"}, {a2, "a2"},
                                                             {b2, "b2"}, {a3, "a3"}, {b3, "b3"}};
  for (const auto& [t, name] : named) record(t, name, order);
  sum(add(a3, b3)).backward();
  CHECK(order == std::vector<std::string>{"b3", "a3", "b2", "a2", "b1", "a1"});
  CHECK(x.grad().item<double>() == 8.0 + 27.0);
}

TEST_CASE("a node reached by paths of different lengths waits for the longest", "[core][engine]") {
  Tensor x = tensor({1.5}, kFloat64).requires_grad_();
  Tensor h = mul(x, 1.0);
  Tensor long_path = mul(mul(mul(h, 2.0), 2.0), 2.0);  // 8h
  Tensor y = add(h, long_path);                        // 9h: h's first consumer is y
  std::vector<std::string> order;
  std::map<std::string, Tensor> seen;
  record(h, "h", order, &seen);
  record(long_path, "long", order);
  sum(y).backward();
  CHECK(order == std::vector<std::string>{"long", "h"});
  CHECK(seen["h"].item<double>() == 9.0);
  CHECK(x.grad().item<double>() == 9.0);
}

TEST_CASE("gradients are summed in the order their consumers run", "[core][engine]") {
  // cat's backward makes three consumers of x ready at once; they send 1e8, -1e8 and 1 (float32).
  // The latest-created runs first, so x.grad = (1 + -1e8) + 1e8, which rounds differently from
  // (1e8 + -1e8) + 1: the sum order is fixed by the graph, never by addresses or timing.
  const float later_first = (1.0f + -1e8f) + 1e8f;
  const float earlier_first = (1e8f + -1e8f) + 1.0f;
  REQUIRE(later_first != earlier_first);
  for (int run = 0; run < 5; ++run) {  // fresh graphs at fresh addresses: the same bits
    Tensor x = ones({1}).requires_grad_();
    Tensor c1 = mul(x, 1e8);
    Tensor c2 = mul(x, -1e8);
    Tensor c3 = mul(x, 1.0);
    sum(cat({c1, c2, c3})).backward();
    CHECK(x.grad().item<float>() == later_first);
  }
}

TEST_CASE("an output below another output waits for its gradient from above", "[core][engine]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor h = mul(x, 2.0);
  Tensor y = sum(mul(h, h));
  std::vector<std::string> order;
  std::map<std::string, Tensor> seen;
  record(h, "h", order, &seen);
  autograd::backward({h, y}, {ones({2}, kFloat64), Tensor()});
  CHECK(order == std::vector<std::string>{"h"});  // once, with both gradients: 1 + 2h
  CHECK(seen["h"].to_vector<double>() == std::vector<double>{5.0, 9.0});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{10.0, 18.0});
  // The same output twice: its node runs once, with the two gradients summed.
  Tensor z = tensor({3.0}, kFloat64).requires_grad_();
  Tensor s = sum(mul(z, 4.0));
  autograd::backward({s, s});
  CHECK(z.grad().item<double>() == 8.0);
}

TEST_CASE("autograd::grad runs no node below the requested inputs", "[core][engine]") {
  Tensor x = tensor({0.0, 1.0}, kFloat64).requires_grad_();
  Tensor h = exp(x);                    // saves its output
  Tensor unrelated = sum(mul(x, 5.0));  // an output branch that leads to no input
  Tensor y = add(sum(mul(h, 3.0)), unrelated);
  std::vector<std::string> order;
  record(h, "h", order);
  auto g = autograd::grad({y}, {h});
  CHECK(g[0].to_vector<double>() == std::vector<double>{3.0, 3.0});
  CHECK(order == std::vector<std::string>{"h"});  // the captured node's hook ran
  CHECK(!x.grad().defined());
  // ExpBackward did not run, so its saved output was not freed: a later backward still works.
  sum(h).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1.0, std::exp(1.0)});
}

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("run_engine stays under 40 lines and docs/autograd.md quotes it as it is",
          "[core][engine]") {
  const std::string root = std::string(NABLA_FIXTURE_DIR) + "/../../";
  const std::vector<std::string> source = read_lines(root + "core/engine.cpp");
  auto start = std::find_if(source.begin(), source.end(), [](const std::string& l) {
    return l.rfind("std::unordered_map<Node*, Tensor> run_engine(", 0) == 0;
  });
  REQUIRE(start != source.end());
  auto open = std::find_if(start, source.end(),
                           [](const std::string& l) { return !l.empty() && l.back() == '{'; });
  auto close = std::find(open, source.end(), "}");
  REQUIRE(close != source.end());
  const std::vector<std::string> body(open + 1, close);
  CHECK(close - start + 1 < 40);

  const std::vector<std::string> doc = read_lines(root + "docs/autograd.md");
  auto section =
      std::find(doc.begin(), doc.end(), "## 2. Backward: `run_engine` in `core/engine.cpp`");
  REQUIRE(section != doc.end());
  auto fence = std::find(section, doc.end(), "```cpp");
  REQUIRE(fence != doc.end());
  auto fence_end = std::find(fence + 1, doc.end(), "```");
  REQUIRE(fence_end != doc.end());
  const std::vector<std::string> quoted(fence + 1, fence_end);
  CHECK(body.size() > 20);
  CHECK(quoted == body);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
