// gradcheck (and gradgradcheck) of the elementwise ops on the standard set of shapes:
// 0-d, size-1 dim, broadcast pair, transposed (non-contiguous) input, batched 4-D, zero-size.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;
using test::positive_leaf;

namespace {

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

std::vector<Tensor> unary_inputs(bool positive) {
  auto make = [&](const Shape& s, uint64_t seed) {
    return positive ? positive_leaf(s, seed) : leaf(s, seed);
  };
  std::vector<Tensor> xs = {make({}, 1), make({1, 3}, 2), make({2, 3, 1, 2}, 3), make({0, 3}, 4)};
  Tensor base = make({3, 4}, 5);
  Tensor transposed = base.detach().t().requires_grad_();  // non-contiguous leaf
  REQUIRE(!transposed.is_contiguous());
  xs.push_back(transposed);
  xs.push_back(make({5}, 6));
  return xs;
}

void check_unary(Unary f, bool positive, bool second_order = true) {
  for (const Tensor& x : unary_inputs(positive)) {
    INFO("shape " << shape_str(x.shape()) << (x.is_contiguous() ? "" : " (transposed)"));
    auto fn = [f](const std::vector<Tensor>& in) { return f(in[0]); };
    CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
    if (second_order) CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{x});
  }
}

std::vector<std::pair<Tensor, Tensor>> binary_inputs(bool positive_rhs) {
  auto rhs = [&](const Shape& s, uint64_t seed) {
    return positive_rhs ? positive_leaf(s, seed) : leaf(s, seed);
  };
  Tensor at = leaf({4, 3}, 9).detach().t().requires_grad_();
  return {
      {leaf({}, 1), rhs({}, 2)},                        // 0-d
      {leaf({1, 3}, 3), rhs({1, 3}, 4)},                // size-1 dim
      {leaf({2, 3}, 5), rhs({3}, 6)},                   // broadcast
      {leaf({2, 1, 3}, 7), rhs({4, 1}, 8)},             // broadcast both ways
      {at, rhs({3, 4}, 10)},                            // transposed lhs
      {leaf({2, 2, 3, 2}, 11), rhs({2, 2, 3, 2}, 12)},  // batched 4-D
      {leaf({0, 3}, 13), rhs({3}, 14)},                 // zero-size
  };
}

void check_binary(Binary f, bool positive_rhs) {
  for (auto& [a, b] : binary_inputs(positive_rhs)) {
    INFO("shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
    auto fn = [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
    CHECK_GRADCHECK(fn, (std::vector<Tensor>{a, b}));
    CHECK_GRADGRADCHECK(fn, (std::vector<Tensor>{a, b}));
  }
}

}  // namespace

TEST_CASE("add sub mul div pass gradcheck and gradgradcheck", "[ops]") {
  SECTION("add") { check_binary(add, false); }
  SECTION("sub") { check_binary(sub, false); }
  SECTION("mul") { check_binary(mul, false); }
  SECTION("div") { check_binary(div, true); }
  SECTION("pow tensor^tensor") {
    check_binary([](const Tensor& a, const Tensor& b) { return pow(abs(a) + 0.5, b); }, false);
  }
}

TEST_CASE("unary ops pass gradcheck and gradgradcheck", "[ops]") {
  SECTION("neg") { check_unary(neg, false); }
  SECTION("exp") { check_unary(exp, false); }
  SECTION("log") { check_unary(log, true); }
  SECTION("sqrt") { check_unary(sqrt, true); }
  SECTION("abs") { check_unary(abs, false); }
  SECTION("tanh") { check_unary(tanh, false); }
  SECTION("sigmoid") { check_unary(sigmoid, false); }
  SECTION("relu") { check_unary(relu, false); }
  SECTION("pow scalar") {
    check_unary([](const Tensor& x) { return pow(x, 3.0); }, false);
    check_unary([](const Tensor& x) { return pow(x, -1.5); }, true);
    check_unary([](const Tensor& x) { return pow(x, 0.0); }, true);
  }
  SECTION("scalar forms") {
    check_unary([](const Tensor& x) { return 2.0 - x * 3.0 + 1.0; }, false);
    check_unary([](const Tensor& x) { return 1.0 / x; }, true);
  }
}

TEST_CASE("elementwise forward values", "[ops]") {
  Tensor a = tensor({1, 2, 3}), b = tensor({4, 5, 6});
  CHECK((a + b).to_vector<float>() == std::vector<float>{5, 7, 9});
  CHECK((a - b).to_vector<float>() == std::vector<float>{-3, -3, -3});
  CHECK((a * b).to_vector<float>() == std::vector<float>{4, 10, 18});
  CHECK((b / a).to_vector<float>() == std::vector<float>{4, 2.5, 2});
  CHECK(relu(tensor({-1, 0, 2})).to_vector<float>() == std::vector<float>{0, 0, 2});
  CHECK(abs(tensor({-1, 0, 2})).to_vector<float>() == std::vector<float>{1, 0, 2});
  CHECK(sign(tensor({-3, 0, 2})).to_vector<float>() == std::vector<float>{-1, 0, 1});
  // Large negative logits: sigmoid stays finite and exact.
  CHECK(sigmoid(tensor({-1000.0}, kFloat64)).item<double>() == 0.0);
  CHECK(sigmoid(tensor({1000.0}, kFloat64)).item<double>() == 1.0);
  // Integer arithmetic works and stays integral.
  CHECK((arange(3) + arange(3)).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4});
}

TEST_CASE("binary ops name the op and both shapes on a mismatch", "[ops]") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  for (auto [name, f] : std::vector<std::pair<std::string, Binary>>{
           {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}}) {
    INFO(name);
    CHECK_THROWS_AS(f(a, b), ShapeError);
    CHECK_THROWS_WITH(f(a, b), Contains(name) && Contains("(2, 3)") && Contains("(4,)"));
  }
  CHECK_THROWS_WITH(pow(a, b), Contains("pow") && Contains("(2, 3)") && Contains("(4,)"));
  CHECK_THROWS_WITH(add(zeros({2}), zeros({2}, kFloat64)),
                    Contains("add") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(exp(arange(3)), DTypeError);
}

TEST_CASE("in-place arithmetic", "[ops]") {
  Tensor a = tensor({1, 2, 3});
  add_(a, tensor({1, 1, 1}));
  mul_(a, 2.0);
  CHECK(a.to_vector<float>() == std::vector<float>{4, 6, 8});
  a -= tensor({1.0});
  a /= tensor({2.0});
  CHECK(a.to_vector<float>() == std::vector<float>{1.5, 2.5, 3.5});
  CHECK_THROWS_WITH(add_(a, zeros({2, 3})), Contains("add_") && Contains("(2, 3)"));
}

TEST_CASE("comparisons and logical ops", "[ops]") {
  Tensor a = tensor({1, 2, 3}), b = tensor({3, 2, 1});
  CHECK(lt(a, b).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(le(a, b).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(eq(a, b).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(ne(a, 2.0).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(gt(a, b).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(ge(a, 2.0).to_vector<bool>() == std::vector<bool>{false, true, true});
  Tensor m = lt(a, b), n = gt(a, b);
  CHECK(logical_or(m, n).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(logical_and(m, n).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(logical_not(m).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK_THROWS_AS(logical_and(a, b), DTypeError);
  CHECK(!lt(a.detach().requires_grad_(), b).requires_grad());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
