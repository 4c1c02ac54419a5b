// Module hooks with PyTorch's semantics: forward pre-hooks (may replace the inputs), forward hooks
// (may replace the outputs), full backward hooks (grad_input / grad_output, checked against
// autograd::grad), handles that remove them, and the order across nested modules.
#include "nabla/nn/inspect.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<nn::Sequential> mlp() {
  Generator g(3);
  auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 4, true, kFloat64),
                                              std::make_shared<nn::Tanh>(),
                                              std::make_shared<nn::Linear>(4, 2, true, kFloat64));
  for (auto& p : net->parameters()) {
    NoGradGuard no_grad;
    p.copy_(randn(p.shape(), g, kFloat64));
  }
  return net;
}

Tensor input(bool requires_grad = false) {
  Generator g(5);
  Tensor x = randn({5, 3}, g, kFloat64);
  return requires_grad ? x.requires_grad_() : x;
}

}  // namespace

TEST_CASE("forward hook captures activations", "[nn][hooks]") {
  auto net = mlp();
  Tensor x = input();
  std::vector<Tensor> captured;
  net->at<nn::Tanh>(1)->register_forward_hook(
      [&](const nn::Module& m, const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
        CHECK(m.name() == "Tanh");
        REQUIRE(in.size() == 1);
        REQUIRE(out.size() == 1);
        captured.push_back(out[0].detach().clone());
      });
  Tensor y = (*net)(x);
  REQUIRE(captured.size() == 1);
  Tensor expected = tanh((*net->at<nn::Linear>(0))(x));
  CHECK_CLOSE(captured[0], expected, 0, 0);
  (*net)(x);
  CHECK(captured.size() == 2);
}

TEST_CASE("forward pre-hook replaces the input; forward hook replaces the output", "[nn][hooks]") {
  auto lin = mlp()->at<nn::Linear>(0);
  Tensor x = input();
  Tensor plain = (*lin)(x);
  auto pre = lin->register_forward_pre_hook(
      [](const nn::Module&, const std::vector<Tensor>& in) { return mul(in[0], 2.0); });
  CHECK_CLOSE((*lin)(x), (*lin).forward(mul(x, 2.0)), 1e-12, 0);
  pre.remove();
  auto post = lin->register_forward_hook(
      [](const nn::Module&, const std::vector<Tensor>&,
         const std::vector<Tensor>& out) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{neg(out[0])};
      });
  CHECK_CLOSE((*lin)(x), neg(plain), 1e-12, 0);
  post.remove();
  CHECK_CLOSE((*lin)(x), plain, 0, 0);
  // forward() itself never runs hooks (PyTorch: calling .forward bypasses them).
  auto again =
      lin->register_forward_hook([](const nn::Module&, const std::vector<Tensor>&,
                                    const std::vector<Tensor>& out) { return neg(out[0]); });
  CHECK_CLOSE(lin->forward(x), plain, 0, 0);
  again.remove();
}

TEST_CASE("hook handles remove their hook; ScopedHook removes on scope exit", "[nn][hooks]") {
  auto lin = mlp()->at<nn::Linear>(0);
  int calls = 0;
  auto count = [&](const nn::Module&, const std::vector<Tensor>&) { ++calls; };
  nn::HookHandle h = lin->register_forward_pre_hook(count);
  CHECK(h.active());
  (*lin)(input());
  CHECK(calls == 1);
  h.remove();
  CHECK_FALSE(h.active());
  h.remove();  // idempotent
  (*lin)(input());
  CHECK(calls == 1);
  {
    nn::ScopedHook scoped(lin->register_forward_pre_hook(count));
    (*lin)(input());
    CHECK(calls == 2);
  }
  (*lin)(input());
  CHECK(calls == 2);
  // Removing one hook keeps the others.
  auto a = lin->register_forward_pre_hook(count);
  auto b = lin->register_forward_pre_hook(count);
  a.remove();
  (*lin)(input());
  CHECK(calls == 3);
  CHECK(b.active());
  // A handle outliving its module is harmless.
  nn::HookHandle orphan;
  {
    auto tmp = std::make_shared<nn::Linear>(2, 2);
    orphan = tmp->register_forward_hook(
        [](const nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {});
  }
  CHECK_FALSE(orphan.active());
  orphan.remove();
}

TEST_CASE("full backward hook: grad_input and grad_output equal autograd::grad", "[nn][hooks]") {
  auto net = mlp();
  auto lin = net->at<nn::Linear>(2);
  std::vector<Tensor> gin, gout;
  int calls = 0;
  lin->register_full_backward_hook([&](const nn::Module& m, const std::vector<Tensor>& grad_input,
                                       const std::vector<Tensor>& grad_output) {
    CHECK(m.name() == "Linear");
    ++calls;
    gin = grad_input;
    gout = grad_output;
  });
  Tensor x = input(true);
  Tensor h = (*net->at<nn::Tanh>(1))((*net->at<nn::Linear>(0))(x));
  Tensor y = (*lin)(h);
  Tensor loss = sum(mul(y, y));
  auto expected = autograd::grad({loss}, {h, y}, {}, /*retain_graph=*/true);
  CHECK(calls == 1);  // autograd::grad reached the module's inputs too
  calls = 0;
  loss.backward();
  CHECK(calls == 1);
  REQUIRE(gin.size() == 1);
  REQUIRE(gout.size() == 1);
  CHECK_CLOSE(gin[0], expected[0], 1e-12, 0);
  CHECK_CLOSE(gout[0], expected[1], 1e-12, 0);
  CHECK_CLOSE(gout[0], mul(y, 2.0), 1e-12, 0);
}

TEST_CASE("full backward hook: the returned grad_input replaces the gradient", "[nn][hooks]") {
  auto net = mlp();
  Tensor x = input(true);
  Tensor plain_grad = autograd::grad({sum((*net)(x))}, {x})[0];
  net->at<nn::Tanh>(1)->register_full_backward_hook(
      [](const nn::Module&, const std::vector<Tensor>& grad_input, const std::vector<Tensor>&) {
        return std::vector<Tensor>{mul(grad_input[0], 3.0)};
      });
  sum((*net)(x)).backward();
  CHECK_CLOSE(x.grad(), mul(plain_grad, 3.0), 1e-12, 0);
  // A wrong count is a clear error.
  net->at<nn::Linear>(0)->register_full_backward_hook(
      [](const nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {
        return std::vector<Tensor>{};
      });
  CHECK_THROWS_WITH(sum((*net)(x)).backward(),
                    Contains("Linear full backward hook") && Contains("0 gradients for 1 inputs"));
}

TEST_CASE("full backward hook: inputs without grad give undefined grad_input", "[nn][hooks]") {
  auto net = mlp();
  auto first = net->at<nn::Linear>(0);
  std::vector<Tensor> gin, gout;
  int calls = 0;
  first->register_full_backward_hook([&](const nn::Module&, const std::vector<Tensor>& grad_input,
                                         const std::vector<Tensor>& grad_output) {
    ++calls;
    gin = grad_input;
    gout = grad_output;
  });
  Tensor x = input(false);
  Tensor h = (*first)(x);
  Tensor loss = sum((*net->at<nn::Linear>(2))((*net->at<nn::Tanh>(1))(h)));
  Tensor expected = autograd::grad({loss}, {h}, {}, /*retain_graph=*/true)[0];
  calls = 0;
  loss.backward();
  CHECK(calls == 1);
  REQUIRE(gin.size() == 1);
  CHECK_FALSE(gin[0].defined());
  REQUIRE(gout.size() == 1);
  CHECK_CLOSE(gout[0], expected, 1e-12, 0);
  // The parameters still get their gradients through the wrapped output.
  CHECK(first->weight().grad().defined());
}

TEST_CASE("full backward hook on a module with three inputs and two outputs", "[nn][hooks]") {
  Generator g(11);
  nn::MultiheadAttention mha(4, 2, 0.0, true, 0, 0, /*batch_first=*/true);
  mha.to(kFloat64);
  Tensor x = randn({2, 3, 4}, g, kFloat64).requires_grad_();
  std::vector<Tensor> gin, gout, outs;
  mha.register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&,
                                const std::vector<Tensor>& out) { outs = out; });
  mha.register_full_backward_hook([&](const nn::Module&, const std::vector<Tensor>& grad_input,
                                      const std::vector<Tensor>& grad_output) {
    gin = grad_input;
    gout = grad_output;
  });
  nn::MhaOutput r = mha(x, x, x);
  REQUIRE(outs.size() == 2);                   // output and weights
  Tensor loss = sum(mul(r.output, r.output));  // the weights are not used
  Tensor expected = autograd::grad({loss}, {x}, {}, /*retain_graph=*/true)[0];
  loss.backward();
  REQUIRE(gin.size() == 3);
  // query, key and value are the same tensor: their gradients sum to x's.
  CHECK_CLOSE(add(add(gin[0], gin[1]), gin[2]), expected, 1e-10, 0);
  CHECK_CLOSE(x.grad(), expected, 1e-10, 0);
  REQUIRE(gout.size() == 2);
  CHECK_CLOSE(gout[0], mul(r.output, 2.0), 1e-12, 0);
  CHECK_FALSE(gout[1].defined());
}

TEST_CASE("hooks on nested modules run in PyTorch's order", "[nn][hooks]") {
  auto net = mlp();
  std::vector<std::string> order;
  auto add_hooks = [&](nn::Module& m, const std::string& name) {
    m.register_forward_pre_hook([&order, name](const nn::Module&, const std::vector<Tensor>&) {
      order.push_back("pre " + name);
    });
    m.register_forward_hook(
        [&order, name](const nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {
          order.push_back("fwd " + name);
        });
    m.register_full_backward_hook(
        [&order, name](const nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {
          order.push_back("bwd " + name);
        });
  };
  add_hooks(*net, "seq");
  for (size_t i = 0; i < net->size(); ++i) add_hooks(*(*net)[i], std::to_string(i));
  Tensor x = input(true);
  Tensor loss = sum((*net)(x));
  CHECK(order == std::vector<std::string>{"pre seq", "pre 0", "fwd 0", "pre 1", "fwd 1", "pre 2",
                                          "fwd 2", "fwd seq"});
  order.clear();
  loss.backward();
  // Innermost and last first: a module's hook runs once its inputs' gradients are complete.
  CHECK(order == std::vector<std::string>{"bwd 2", "bwd 1", "bwd 0", "bwd seq"});
}

TEST_CASE("hooks: bad replacements are clear errors; no hooks changes nothing", "[nn][hooks]") {
  auto net = mlp();
  Tensor x = input(true);
  Tensor before = (*net)(x);
  CHECK_CLOSE(before, net->forward(x), 0, 0);
  CHECK(std::string(before.grad_fn()->name()).find("BackwardHook") == std::string::npos);
  auto lin = net->at<nn::Linear>(0);
  auto bad = lin->register_forward_pre_hook([](const nn::Module&, const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], in[0]};
  });
  CHECK_THROWS_WITH((*net)(x), Contains("Linear forward pre-hook") && Contains("2 inputs"));
  bad.remove();
  auto bad_out =
      lin->register_forward_hook([](const nn::Module&, const std::vector<Tensor>&,
                                    const std::vector<Tensor>&) { return std::vector<Tensor>{}; });
  CHECK_THROWS_WITH((*net)(x), Contains("Linear forward hook") && Contains("0 outputs"));
}

TEST_CASE("a module destroyed before backward does not call its hook", "[nn][hooks]") {
  Tensor x = input(true);
  int calls = 0;
  Tensor y;
  {
    auto lin = std::make_shared<nn::Linear>(3, 2, true, kFloat64);
    lin->register_full_backward_hook([&](const nn::Module&, const std::vector<Tensor>&,
                                         const std::vector<Tensor>&) { ++calls; });
    y = (*lin)(x);
  }
  sum(y).backward();
  CHECK(calls == 0);
  CHECK(x.grad().defined());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
