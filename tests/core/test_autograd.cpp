#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

TEST_CASE("diamond graph sums both paths", "[core]") {
  Tensor x = tensor({2.0}, kFloat64).requires_grad_();
  Tensor a = mul(x, 3.0), b = mul(x, x);  // y = 3x + x^2, dy/dx = 3 + 2x = 7
  Tensor y = sum(add(a, b));
  y.backward();
  CHECK(x.grad().item<double>() == 7.0);
}

TEST_CASE("a tensor used twice gets both gradients", "[core]") {
  Tensor x = tensor({3.0, -1.0}, kFloat64).requires_grad_();
  Tensor y = sum(mul(x, x));
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6.0, -2.0});
}

TEST_CASE(".grad accumulates across backward calls and zero_ resets it", "[core]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  sum(mul(x, 2.0)).backward();
  sum(mul(x, 3.0)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5.0, 5.0});
  x.set_grad(Tensor());
  sum(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1.0, 1.0});
}

TEST_CASE("gradients of two leaves do not share storage", "[core]") {
  Tensor x = ones({3}).requires_grad_(), y = ones({3}).requires_grad_();
  sum(add(x, y)).backward();
  Tensor gx = x.grad();
  gx.fill_(5);
  CHECK(y.grad().to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("second backward without retain_graph throws a clear error", "[core]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Contains("second time") && Contains("retain_graph"));
  Tensor z = sum(exp(x));
  z.backward({}, /*retain_graph=*/true);
  z.backward();
  CHECK(x.grad().to_vector<double>()[0] == Approx(3 * std::exp(1.0)));
}

TEST_CASE("create_graph gives the second derivative of x^3", "[core]") {
  Tensor x = tensor({2.0}, kFloat64).requires_grad_();
  Tensor y = sum(pow(x, 3.0));
  auto g = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true);
  CHECK(g[0].item<double>() == Approx(12.0));  // 3x^2
  auto gg = autograd::grad({sum(g[0])}, {x});
  CHECK(gg[0].item<double>() == Approx(12.0));  // 6x
  // Through backward() too: x.grad keeps its history.
  Tensor x2 = tensor({3.0}, kFloat64).requires_grad_();
  sum(mul(mul(x2, x2), x2)).backward({}, false, true);
  Tensor first = x2.grad();
  CHECK(first.item<double>() == Approx(27.0));
  REQUIRE(first.requires_grad());
  auto second = autograd::grad({sum(first)}, {x2});
  CHECK(second[0].item<double>() == Approx(18.0));
  x2.set_grad(Tensor());  // break the grad -> graph -> leaf cycle create_graph makes
}

TEST_CASE("backward on a non-scalar without a gradient throws", "[core]") {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH(y.backward(), Contains("scalar") && Contains("(3,)"));
  y.backward(ones({3}));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
}

TEST_CASE("hooks see and can replace gradients", "[core]") {
  Tensor x = ones({2}, kFloat64).requires_grad_();
  Tensor seen;
  x.register_hook([&](const Tensor& g) {
    seen = g;
    return Tensor();
  });
  Tensor h = mul(x, 3.0);
  h.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  sum(h).backward();
  CHECK(seen.to_vector<double>() == std::vector<double>{30, 30});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{30, 30});
}

TEST_CASE("retain_grad keeps a non-leaf gradient", "[core]") {
  Tensor x = ones({2}, kFloat64).requires_grad_();
  Tensor h = mul(x, 3.0);
  h.retain_grad();
  sum(mul(h, h)).backward();
  CHECK(h.grad().to_vector<double>() == std::vector<double>{6, 6});
}

TEST_CASE("no_grad and detach record nothing", "[core]") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard guard;
    Tensor y = mul(x, 2.0);
    CHECK(!y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK(mul(x, 2.0).requires_grad());
  Tensor d = x.detach();
  CHECK(!d.requires_grad());
  CHECK(d.storage() == x.storage());
  CHECK(!mul(d, 2.0).requires_grad());
}

TEST_CASE("modifying a saved tensor makes backward throw naming the op", "[core]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor a = mul(x, 1.0);  // non-leaf
  Tensor y = sum(exp(a));  // exp saves its output; mul below saves a
  Tensor z = sum(mul(a, a));
  {
    NoGradGuard guard;
    Tensor alias = a;
    mul_(alias, 2.0);
  }
  CHECK_THROWS_WITH(z.backward(), Contains("MulBackward") && Contains("in-place"));
}

TEST_CASE("in-place on a leaf that requires grad throws under grad mode", "[core]") {
  Tensor w = ones({2}).requires_grad_();
  CHECK_THROWS_WITH(add_(w, ones({2})), Contains("add_") && Contains("leaf"));
  CHECK_THROWS_AS(w.fill_(0), AutogradError);
  NoGradGuard guard;
  add_(w, ones({2}));
  CHECK(w.to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("in-place on a non-leaf records the op as its new history", "[core]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor h = mul(x, 3.0);
  add_(h, x);  // h = 3x + x
  sum(h).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4.0, 4.0});
}

TEST_CASE("a 200,000-op chain runs backward and is freed without recursion", "[core]") {
  Tensor x = ones({1}, kFloat64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = add(y, 1e-6);
  sum(y).backward();
  CHECK(x.grad().item<double>() == 1.0);
  y = Tensor();  // destroys the chain
  // A chain that never ran backward (its saved tensors still alive) is freed too.
  Tensor z = x;
  for (int i = 0; i < 200000; ++i) z = mul(z, 1.0);
  z = Tensor();
  SUCCEED();
}

TEST_CASE("autograd::grad returns gradients without touching .grad", "[core]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor w = tensor({3.0, 4.0}, kFloat64).requires_grad_();
  Tensor y = sum(mul(x, w));
  auto g = autograd::grad({y}, {x});
  CHECK(g[0].to_vector<double>() == std::vector<double>{3, 4});
  CHECK(!x.grad().defined());
  CHECK(!w.grad().defined());
  Tensor unused = ones({1}, kFloat64).requires_grad_();
  Tensor y2 = sum(mul(x, w));
  CHECK_THROWS_WITH(autograd::grad({y2}, {unused}, {}, true), Contains("not used"));
  auto g2 = autograd::grad({y2}, {unused, w}, {}, false, false, /*allow_unused=*/true);
  CHECK(!g2[0].defined());
  CHECK(g2[1].to_vector<double>() == std::vector<double>{1, 2});
}

TEST_CASE("broadcasting is undone in the engine", "[core]") {
  Tensor a = ones({2, 3}, kFloat64).requires_grad_();
  Tensor b = ones({3}, kFloat64).requires_grad_();
  Tensor c = ones({2, 1}, kFloat64).requires_grad_();
  sum(mul(add(a, b), c)).backward();
  CHECK(b.grad().shape() == Shape{3});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{2, 2, 2});
  CHECK(c.grad().to_vector<double>() == std::vector<double>{6, 6});
}

TEST_CASE("anomaly mode names the node that produced a NaN", "[core]") {
  Tensor x = tensor({0.0, 1.0}, kFloat64).requires_grad_();
  Tensor y = sum(sqrt(x));  // d sqrt(x)/dx at 0 is inf
  AnomalyGuard anomaly;
  CHECK_THROWS_WITH(y.backward(), Contains("SqrtBackward") && Contains("'sqrt'"));
}

TEST_CASE("requires_grad_ only on floating leaves", "[core]") {
  CHECK_THROWS_AS(arange(3).requires_grad_(), DTypeError);
  Tensor x = ones({2}).requires_grad_();
  CHECK_THROWS_AS(mul(x, 2.0).requires_grad_(), AutogradError);
}

TEST_CASE("gradcheck catches a wrong gradient", "[core]") {
  // A deliberately wrong op: forward x^2, backward claims x (missing factor 2).
  struct WrongBackward final : Node {
    SavedTensor x{this};
    std::vector<Tensor> backward(const Tensor& grad) override { return {mul(grad, x.get())}; }
    const char* name() const override { return "WrongBackward"; }
  };
  auto wrong_square = [](const std::vector<Tensor>& in) {
    Tensor y;
    {
      NoGradGuard g;
      y = mul(in[0], in[0]);
    }
    if (auto node = make_node<WrongBackward>({&in[0]})) {
      node->x.save(in[0]);
      set_history(y, node);
    }
    return y;
  };
  auto r = gradcheck(wrong_square, {test::leaf({3})});
  CHECK(!r.ok);
  CHECK_THAT(r.message, Contains("mismatch"));
  auto right = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  CHECK(gradcheck(right, {test::leaf({3})}).ok);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
