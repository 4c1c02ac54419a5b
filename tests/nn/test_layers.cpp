// The basic layers: Linear (init, shapes, errors, gradcheck), activations and Flatten.
#include <cmath>

#include "tests/helpers.h"

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

TEST_CASE("Linear: parameters, default init bounds, forward", "[nn]") {
  manual_seed(3);
  nn::Linear lin(16, 8);
  CHECK(lin.weight().shape() == Shape{8, 16});
  CHECK(lin.bias().shape() == Shape{8});
  CHECK(lin.weight().dtype() == kFloat32);
  CHECK(lin.num_parameters() == 8 * 16 + 8);
  const double bound = 1.0 / std::sqrt(16.0);  // kaiming_uniform_(a = sqrt(5)) on fan_in 16
  for (const Tensor& t : {lin.weight(), lin.bias()}) {
    auto v = t.to(kFloat64).to_vector<double>();
    double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    CHECK(hi - lo > bound);  // actually spread over the interval
  }
  nn::Linear nb(3, 2, /*bias=*/false);
  CHECK(!nb.bias().defined());
  CHECK(nb.named_parameters().size() == 1);

  // Generator: the same seed gives the same weights.
  Generator g1(42), g2(42);
  nn::Linear a(5, 4), b(5, 4);
  a.reset_parameters(g1);
  b.reset_parameters(g2);
  CHECK(a.weight().to_vector<float>() == b.weight().to_vector<float>());
  CHECK(a.bias().to_vector<float>() == b.bias().to_vector<float>());

  nn::Linear d(4, 3, true, kFloat64);
  Tensor x = leaf({2, 5, 4});  // batched 3-D input
  Tensor y = d(x);
  CHECK(y.shape() == Shape{2, 5, 3});
  CHECK_CLOSE(y, add(matmul(x, d.weight().t()), d.bias()), 1e-12, 0);
  CHECK(d(leaf({4})).shape() == Shape{3});
}

TEST_CASE("Linear: errors name the shapes and dtypes", "[nn]") {
  nn::Linear lin(4, 3, true, kFloat64);
  CHECK_THROWS_AS(lin(zeros({2, 5}, kFloat64)), ShapeError);
  CHECK_THROWS_WITH(lin(zeros({2, 5}, kFloat64)),
                    Contains("Linear") && Contains("(2, 5)") && Contains("in_features = 4"));
  CHECK_THROWS_WITH(lin(zeros({}, kFloat64)), Contains("()"));
  CHECK_THROWS_WITH(lin(zeros({2, 4}, kFloat32)), Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(nn::Linear(-1, 3), ValueError);
  CHECK_THROWS_AS(nn::Linear(2, 3, true, kInt64), DTypeError);
}

TEST_CASE("Linear passes gradcheck and gradgradcheck", "[nn]") {
  for (bool bias : {true, false}) {
    nn::Linear lin(3, 2, bias, kFloat64);
    std::vector<Tensor> xs = {leaf({3}, 1),       leaf({1, 3}, 2),
                              leaf({2, 2, 3}, 3), leaf({2, 1, 2, 3}, 4),
                              leaf({0, 3}, 5),    leaf({3, 4}, 6).detach().t().requires_grad_()};
    for (const Tensor& x : xs) {
      INFO("input " << shape_str(x.shape()) << (bias ? " with bias" : " no bias"));
      std::vector<Tensor> inputs = {x, lin.weight()};
      if (bias) inputs.push_back(lin.bias());
      auto fn = [&](const std::vector<Tensor>& in) { return lin(in[0]); };
      CHECK_GRADCHECK(fn, inputs);
      CHECK_GRADGRADCHECK(fn, inputs);
    }
  }
}

TEST_CASE("Activation layers and Flatten", "[nn]") {
  Tensor x = leaf({2, 3, 4});
  CHECK_CLOSE(nn::ReLU()(x), relu(x), 0, 0);
  CHECK_CLOSE(nn::Tanh()(x), tanh(x), 0, 0);
  CHECK_CLOSE(nn::Sigmoid()(x), sigmoid(x), 0, 0);
  CHECK(nn::Identity()(x).same(x));
  CHECK(nn::Flatten()(x).shape() == Shape{2, 12});
  CHECK(nn::Flatten(0, 1)(x).shape() == Shape{6, 4});
  CHECK(nn::Flatten(0)(x).shape() == Shape{24});
  CHECK_THROWS_AS(nn::Flatten(2, 1)(x), ShapeError);
  CHECK_THROWS_AS(nn::Flatten(5)(x), Error);
  auto fn = [](const std::vector<Tensor>& in) {
    return nn::Flatten()(nn::Tanh()(nn::ReLU()(in[0]) + nn::Sigmoid()(in[0])));
  };
  CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
  CHECK(nn::ReLU().num_parameters() == 0);
}
