// Pointwise math and selection ops: gradcheck and gradgradcheck on the standard shapes (0-d,
// size-1 dim, broadcast, transposed, batched 4-D, zero-size), PyTorch's conventions at kinks and
// ties, and error messages.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;
using test::positive_leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void check_fn(const Fn& fn, const std::vector<Tensor>& inputs, bool second_order = true) {
  CHECK_GRADCHECK(fn, inputs);
  if (second_order) CHECK_GRADGRADCHECK(fn, inputs);
}

// 0-d, size-1 dim, batched 4-D, zero-size, transposed (non-contiguous), 1-D.
std::vector<Tensor> unary_inputs(bool positive) {
  auto make = [&](const Shape& s, uint64_t seed) {
    return positive ? positive_leaf(s, seed) : leaf(s, seed);
  };
  Tensor transposed = make({3, 4}, 5).detach().t().requires_grad_();
  REQUIRE(!transposed.is_contiguous());
  return {make({}, 1),     make({1, 3}, 2), make({2, 3, 1, 2}, 3),
          make({0, 3}, 4), transposed,      make({5}, 6)};
}

void check_unary(Tensor (*f)(const Tensor&), bool positive) {
  for (const Tensor& x : unary_inputs(positive)) {
    INFO("shape " << shape_str(x.shape()) << (x.is_contiguous() ? "" : " (transposed)"));
    check_fn([f](auto& in) { return f(in[0]); }, {x});
  }
}

// Pairs covering 0-d, size-1 dims, broadcasting both ways, a transposed lhs, 4-D and zero-size.
std::vector<std::pair<Tensor, Tensor>> binary_inputs() {
  Tensor at = leaf({4, 3}, 9).detach().t().requires_grad_();
  return {{leaf({}, 1), leaf({}, 2)},       {leaf({1, 3}, 3), leaf({1, 3}, 4)},
          {leaf({2, 3}, 5), leaf({3}, 6)},  {leaf({2, 1, 3}, 7), leaf({4, 1}, 8)},
          {at, leaf({3, 4}, 10)},           {leaf({2, 2, 3, 2}, 11), leaf({2, 2, 3, 2}, 12)},
          {leaf({0, 3}, 13), leaf({3}, 14)}};
}

Tensor bool_mask(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return gt(randn(shape, g, kFloat64), 0.0);
}

std::vector<double> grad_of(const Tensor& x, const Tensor& y) {
  Tensor gx = autograd::grad({sum(y)}, {x})[0];
  return gx.to_vector<double>();
}

}  // namespace

TEST_CASE("sin cos rsqrt reciprocal square erf pass gradcheck and gradgradcheck", "[ops]") {
  SECTION("sin") { check_unary(sin, false); }
  SECTION("cos") { check_unary(cos, false); }
  SECTION("rsqrt") { check_unary(rsqrt, true); }
  SECTION("reciprocal") { check_unary(reciprocal, true); }
  SECTION("square") { check_unary(square, false); }
  SECTION("erf") { check_unary(erf, false); }
}

TEST_CASE("pointwise math values", "[ops]") {
  Tensor x = tensor({0.0, 0.5, 4.0}, kFloat64);
  CHECK_CLOSE(sin(x), tensor({0.0, std::sin(0.5), std::sin(4.0)}, kFloat64), 1e-15, 0);
  CHECK_CLOSE(cos(x), tensor({1.0, std::cos(0.5), std::cos(4.0)}, kFloat64), 1e-15, 0);
  CHECK_CLOSE(rsqrt(tensor({4.0, 0.25}, kFloat64)), tensor({0.5, 2.0}, kFloat64), 1e-15, 0);
  CHECK(std::isinf(rsqrt(tensor({0.0})).item<float>()));
  CHECK_CLOSE(reciprocal(tensor({-2.0, 0.5}, kFloat64)), tensor({-0.5, 2.0}, kFloat64), 0, 0);
  CHECK(square(arange(4)).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 4, 9});
  CHECK_CLOSE(erf(tensor({-1.0, 0.0, 2.0}, kFloat64)),
              tensor({-0.8427007929497149, 0.0, 0.9953222650189527}, kFloat64), 1e-15, 0);
  CHECK_THROWS_AS(sin(arange(3)), DTypeError);
  CHECK_THROWS_WITH(reciprocal(arange(3)), Contains("reciprocal") && Contains("int64"));
}

TEST_CASE("clamp passes gradcheck and gradgradcheck", "[ops]") {
  for (const Tensor& x : unary_inputs(false)) {
    INFO("shape " << shape_str(x.shape()));
    check_fn([](auto& in) { return clamp(in[0], -0.5, 0.7); }, {x});
    check_fn([](auto& in) { return clamp(in[0], 0.1, std::nullopt); }, {x});
    check_fn([](auto& in) { return clamp(in[0], std::nullopt, -0.2); }, {x});
  }
}

TEST_CASE("clamp follows PyTorch at the bounds, with min > max and NaN", "[ops]") {
  Tensor x = tensor({-1.0, 0.0, 0.5, 1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = clamp(x, 0.0, 1.0);
  CHECK(y.to_vector<double>() == std::vector<double>{0, 0, 0.5, 1, 1});
  // The gradient passes on the boundaries themselves (min <= x <= max).
  CHECK(grad_of(x, y) == std::vector<double>{0, 1, 1, 1, 0});
  // min > max: every element becomes max and no gradient passes.
  Tensor z = clamp(x, 2.0, 1.0);
  CHECK(z.to_vector<double>() == std::vector<double>(5, 1.0));
  CHECK(grad_of(x, z) == std::vector<double>(5, 0.0));
  // NaN stays NaN and gets no gradient.
  Tensor xn = tensor({NAN, 0.5}, kFloat64).requires_grad_();
  Tensor yn = clamp(xn, 0.0, 1.0);
  CHECK(std::isnan(yn.to_vector<double>()[0]));
  CHECK(grad_of(xn, yn) == std::vector<double>{0, 1});
  // int64 with integral bounds stays int64.
  CHECK(clamp(arange(5), 1.0, 3.0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2, 3, 3});
}

TEST_CASE("clamp errors", "[ops]") {
  CHECK_THROWS_AS(clamp(zeros({2, 3}), std::nullopt, std::nullopt), ValueError);
  CHECK_THROWS_WITH(clamp(zeros({2, 3}), std::nullopt, std::nullopt),
                    Contains("clamp") && Contains("(2, 3)"));
  CHECK_THROWS_AS(clamp(arange(3), 0.5, 2.0), DTypeError);
  CHECK_THROWS_WITH(clamp(arange(3), 0.5, 2.0), Contains("clamp") && Contains("0.5"));
  CHECK_THROWS_AS(clamp(zeros({2}, kBool), 0.0, 1.0), DTypeError);
}

TEST_CASE("maximum and minimum pass gradcheck and gradgradcheck", "[ops]") {
  for (auto& [a, b] : binary_inputs()) {
    INFO("shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
    check_fn([](auto& in) { return maximum(in[0], in[1]); }, {a, b});
    check_fn([](auto& in) { return minimum(in[0], in[1]); }, {a, b});
  }
}

TEST_CASE("maximum and minimum split the gradient at ties and propagate NaN", "[ops]") {
  Tensor a = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor b = tensor({2.0, 2.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = maximum(a, b);
  CHECK(y.to_vector<double>() == std::vector<double>{2, 2, 3});
  auto g = autograd::grad({sum(y)}, {a, b});
  CHECK(g[0].to_vector<double>() == std::vector<double>{0, 0.5, 1});
  CHECK(g[1].to_vector<double>() == std::vector<double>{1, 0.5, 0});
  Tensor m = minimum(a, b);
  CHECK(m.to_vector<double>() == std::vector<double>{1, 2, 2});
  g = autograd::grad({sum(m)}, {a, b});
  CHECK(g[0].to_vector<double>() == std::vector<double>{1, 0.5, 0});
  CHECK(g[1].to_vector<double>() == std::vector<double>{0, 0.5, 1});
  // Broadcast: a scalar b ties with every element; its gradient sums the halves.
  Tensor s = scalar_tensor(2.0, kFloat64).requires_grad_();
  Tensor c = tensor({2.0, 2.0, 5.0}, kFloat64);
  CHECK(autograd::grad({sum(maximum(c, s))}, {s})[0].item<double>() == 1.0);
  // NaN wins and both inputs get the full gradient (PyTorch).
  Tensor an = tensor({1.0, NAN}, kFloat64).requires_grad_();
  Tensor bn = tensor({2.0, 2.0}, kFloat64).requires_grad_();
  Tensor yn = maximum(an, bn);
  CHECK(std::isnan(yn.to_vector<double>()[1]));
  g = autograd::grad({sum(yn)}, {an, bn});
  CHECK(g[0].to_vector<double>() == std::vector<double>{0, 1});
  CHECK(g[1].to_vector<double>() == std::vector<double>{1, 1});
  CHECK(maximum(arange(3), full({1}, 1.0, kInt64)).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 1, 2});
  CHECK_THROWS_WITH(maximum(zeros({2, 3}), zeros({4})),
                    Contains("maximum") && Contains("(2, 3)") && Contains("(4,)"));
  CHECK_THROWS_WITH(minimum(zeros({2}), zeros({2}, kFloat64)),
                    Contains("minimum") && Contains("float32") && Contains("float64"));
}

TEST_CASE("where passes gradcheck and gradgradcheck", "[ops]") {
  uint64_t seed = 100;
  for (auto& [a, b] : binary_inputs()) {
    Shape shape = broadcast_shapes("test", a.shape(), b.shape());
    INFO("shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
    Tensor cond = bool_mask(shape, ++seed);
    check_fn([cond](auto& in) { return where(cond, in[0], in[1]); }, {a, b});
    // cond broadcasting against both inputs
    if (!shape.empty()) {
      Tensor row = bool_mask({shape.back()}, ++seed);
      check_fn([row](auto& in) { return where(row, in[0], in[1]); }, {a, b});
    }
  }
  // a (2, 1), b (3,), cond (4, 1, 1): all three broadcast to (4, 2, 3).
  Tensor cond = bool_mask({4, 1, 1}, 7);
  Tensor y = where(cond, leaf({2, 1}, 1), leaf({3}, 2));
  CHECK(y.shape() == Shape{4, 2, 3});
  check_fn([cond](auto& in) { return where(cond, in[0], in[1]); }, {leaf({2, 1}, 1), leaf({3}, 2)});
  check_fn([cond](auto& in) { return where(cond, in[0], -1.5); }, {leaf({2, 3}, 3)});
}

TEST_CASE("where values and errors", "[ops]") {
  Tensor cond = tensor({1, 0, 1}).to(kBool);
  CHECK(where(cond, tensor({1, 2, 3}), tensor({-1, -2, -3})).to_vector<float>() ==
        std::vector<float>{1, -2, 3});
  CHECK(where(cond, tensor({1, 2, 3}), 0.0).to_vector<float>() == std::vector<float>{1, 0, 3});
  CHECK(where(cond, 9.0, tensor({1, 2, 3})).to_vector<float>() == std::vector<float>{9, 2, 9});
  CHECK(where(cond, arange(3), full({3}, 7.0, kInt64)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 7, 2});
  CHECK_THROWS_AS(where(zeros({3}), zeros({3}), zeros({3})), DTypeError);
  CHECK_THROWS_WITH(where(zeros({3}), zeros({3}), zeros({3})),
                    Contains("where") && Contains("cond") && Contains("float32"));
  CHECK_THROWS_WITH(where(cond, zeros({3}), zeros({3}, kFloat64)),
                    Contains("where") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(where(cond, zeros({2, 3}), zeros({4, 1})), ShapeError);
  CHECK_THROWS_WITH(
      where(cond, zeros({2, 3}), zeros({4, 1})),
      Contains("where") && Contains("(3,)") && Contains("(2, 3)") && Contains("(4, 1)"));
  // No gradient flows to a cond, and cond does not need one.
  Tensor a = leaf({3}, 1);
  CHECK(where(cond, a, 0.0).requires_grad());
  CHECK(!where(cond, a.detach(), 0.0).requires_grad());
}

TEST_CASE("where and gt on long runs match an element-by-element reference", "[ops]") {
  // Runs long enough for the unit-stride loops (a scalar on either side, or none) and for
  // several threads; random masks, every element checked, several dtypes.
  manual_seed(7);
  const int64_t n = 70001;
  Tensor x = randn({n});
  Tensor cond = gt(x, 0.0);
  const std::vector<float> xs = x.to_vector<float>();
  auto ints = [](const Tensor& t) { return t.to(kInt64).to_vector<int64_t>(); };
  std::vector<int64_t> cs;
  for (float f : xs) cs.push_back(f > 0);
  CHECK(ints(cond) == cs);
  Tensor strided = x.reshape({n, 1}).expand({n, 2}).select(1, 1);  // a non-unit path
  CHECK(ints(gt(strided, 0.0)) == cs);
  for (DType dt : {kFloat32, kFloat64, kInt64, kBFloat16}) {
    Tensor a = x.to(dt), b = mul(x, -2.0).to(dt);
    const std::vector<double> av = a.to(kFloat64).to_vector<double>();
    const std::vector<double> bv = b.to(kFloat64).to_vector<double>();
    const std::vector<double> both = where(cond, a, b).to(kFloat64).to_vector<double>();
    const std::vector<double> left = where(cond, a, 5.0).to(kFloat64).to_vector<double>();
    const std::vector<double> right = where(cond, -3.0, b).to(kFloat64).to_vector<double>();
    int64_t wrong = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
      wrong += both[i] != (cs[i] ? av[i] : bv[i]);
      wrong += left[i] != (cs[i] ? av[i] : 5.0);
      wrong += right[i] != (cs[i] ? -3.0 : bv[i]);
    }
    CHECK(wrong == 0);
  }
  // A bool tensor chosen from: one byte per element on both sides.
  Tensor flags = lt(x, 0.5);
  const std::vector<int64_t> fs = ints(flags);
  const std::vector<int64_t> picked = ints(where(cond, flags, scalar_tensor(1.0, kBool)));
  int64_t wrong = 0;
  for (size_t i = 0; i < cs.size(); ++i) wrong += picked[i] != (cs[i] ? fs[i] : 1);
  CHECK(wrong == 0);
}

TEST_CASE("relu's backward gives 0 where the output is 0, even for a NaN gradient", "[ops]") {
  // PyTorch's threshold_backward: y <= 0 ? 0 : grad, not grad * mask (NaN * 0 = NaN).
  Tensor x = tensor({-1.0, 2.0, 0.0}).requires_grad_();
  Tensor y = relu(x);
  y.backward(tensor({std::nan(""), std::nan(""), 1.0}));
  const std::vector<float> g = x.grad().to_vector<float>();
  CHECK(g[0] == 0.0f);
  CHECK(std::isnan(g[1]));
  CHECK(g[2] == 0.0f);
}

TEST_CASE("relu keeps a NaN, and its gradient passes there, as PyTorch's", "[ops]") {
  // torch.relu([nan, -1, 2]) = [nan, 0, 2]; backward of ones: [1, 0, 1]. A NaN turned into 0
  // would hide a diverging model. The fused backward (no graph) and create_graph's recorded
  // where(le(y, 0), 0, grad) must agree, in float32 and float64.
  const double nan = std::nan("");
  for (DType dt : {kFloat32, kFloat64})
    for (bool create_graph : {false, true}) {
      INFO(dtype_name(dt) << (create_graph ? " create_graph" : ""));
      Tensor x = from_vector<double>({nan, -1.0, 2.0, 0.0}, {4}).to(dt).requires_grad_();
      Tensor y = relu(x);
      const std::vector<double> yv = y.to(kFloat64).to_vector<double>();
      CHECK(std::isnan(yv[0]));
      CHECK(yv[1] == 0.0);
      CHECK(yv[2] == 2.0);
      CHECK(yv[3] == 0.0);
      Tensor g = autograd::grad({y}, {x}, {ones({4}, dt)}, false, create_graph)[0];
      CHECK(g.to(kFloat64).to_vector<double>() == std::vector<double>{1, 0, 1, 0});
    }
  // Integers: the same rule.
  CHECK(relu(from_vector<int64_t>({-3, 0, 4}, {3})).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 4});
}

TEST_CASE("masked_fill passes gradcheck and gradgradcheck", "[ops]") {
  uint64_t seed = 200;
  for (const Tensor& x : unary_inputs(false)) {
    INFO("shape " << shape_str(x.shape()));
    Tensor mask = bool_mask(x.shape(), ++seed);
    check_fn([mask](auto& in) { return masked_fill(in[0], mask, 3.5); }, {x});
    if (x.dim() > 0) {  // a mask broadcast along the leading dims
      Tensor row = bool_mask({x.shape().back()}, ++seed);
      // (a moderate fill: a huge one would swamp gradcheck's finite differences)
      check_fn([row](auto& in) { return masked_fill(in[0], row, -4.0); }, {x});
    }
  }
}

TEST_CASE("masked_fill values and errors", "[ops]") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, kFloat64).requires_grad_();
  Tensor mask = tensor({0, 1, 0}).to(kBool);
  Tensor y = masked_fill(x, mask, -1.0);
  CHECK(y.to_vector<double>() == std::vector<double>{1, -1, 3, 4, -1, 6});
  CHECK(grad_of(x, y) == std::vector<double>{1, 0, 1, 1, 0, 1});
  CHECK(masked_fill(arange(3), mask, 9.0).to_vector<int64_t>() == std::vector<int64_t>{0, 9, 2});
  CHECK(masked_fill(zeros({3}, kBool), mask, 1.0).to_vector<bool>() ==
        std::vector<bool>{false, true, false});
  CHECK(std::isinf(masked_fill(zeros({3}), mask, -INFINITY).to_vector<float>()[1]));
  CHECK_THROWS_AS(masked_fill(zeros({2, 3}), zeros({3}), 0.0), DTypeError);
  CHECK_THROWS_WITH(masked_fill(zeros({2, 3}), zeros({3}), 0.0),
                    Contains("masked_fill") && Contains("float32"));
  // The mask must broadcast to x's shape, not the other way round.
  CHECK_THROWS_AS(masked_fill(zeros({3}), zeros({2, 3}, kBool), 0.0), ShapeError);
  CHECK_THROWS_WITH(masked_fill(zeros({3}), zeros({2, 3}, kBool), 0.0),
                    Contains("masked_fill") && Contains("(2, 3)") && Contains("(3,)"));
  CHECK_THROWS_WITH(masked_fill(zeros({2, 3}), zeros({4}, kBool), 0.0),
                    Contains("masked_fill") && Contains("(2, 3)") && Contains("(4,)"));
  CHECK_THROWS_AS(masked_fill(arange(3), mask, 0.5), ValueError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
