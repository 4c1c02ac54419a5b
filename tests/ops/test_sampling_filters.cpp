// apply_temperature, top_k_filter, top_p_filter: hand-checked rows, the gradient of the kept
// logits, gradcheck through softmax (the filtered logits are -inf), errors.
#include <cmath>
#include <limits>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// 1 where the filter kept the logit.
std::vector<int64_t> kept(const Tensor& filtered) {
  return ne(filtered, -kInf).to(kInt64).to_vector<int64_t>();
}

Tensor log_probs(const std::vector<double>& p) {
  return log(from_vector(p, {static_cast<int64_t>(p.size())}));
}

}  // namespace

TEST_CASE("apply_temperature divides the logits", "[ops][sampling]") {
  Tensor x = tensor({1, -2, 4}, kFloat64);
  CHECK(apply_temperature(x, 0.5).to_vector<double>() == std::vector<double>{2, -4, 8});
  CHECK(apply_temperature(x, 2).dtype() == kFloat64);
  for (double t : {0.0, -1.0, std::nan(""), kInf})
    CHECK_THROWS_WITH(apply_temperature(x, t),
                      Contains("apply_temperature") && Contains("temperature must be"));
  CHECK_THROWS_AS(apply_temperature(ones({2}, kInt64), 1.0), DTypeError);
}

TEST_CASE("top_k_filter keeps the k largest and every tie of the k-th", "[ops][sampling]") {
  Tensor x = tensor({{0.5, 3, -1, 2, 2.5}, {1, 1, 0, 1, -4}}, kFloat64);
  Tensor y = top_k_filter(x, 2);
  CHECK(kept(y) == std::vector<int64_t>{0, 1, 0, 0, 1, /* ties of the 2nd kept: */ 1, 1, 0, 1, 0});
  CHECK(y.select(0, 0).select(0, 1).item<double>() == 3);
  CHECK(y.select(0, 0).select(0, 0).item<double>() == -kInf);
  CHECK(kept(top_k_filter(x, 5)) == std::vector<int64_t>(10, 1));
  CHECK(kept(top_k_filter(x, 50)) == std::vector<int64_t>(10, 1));  // k >= V keeps all
  CHECK(kept(top_k_filter(tensor({3, 1, 2}), 1)) == std::vector<int64_t>{1, 0, 0});
  CHECK(top_k_filter(zeros({2, 0}), 3).shape() == Shape{2, 0});
  CHECK_THROWS_WITH(top_k_filter(x, 0), Contains("top_k_filter") && Contains("k must be >= 1"));
  CHECK_THROWS_AS(top_k_filter(scalar_tensor(1.0), 1), ShapeError);
  CHECK_THROWS_AS(top_k_filter(ones({3}, kInt64), 1), DTypeError);
}

TEST_CASE("top_p_filter keeps the smallest most likely set reaching p", "[ops][sampling]") {
  // Probabilities 0.05 0.5 0.15 0.3; ascending 0.05 0.15 0.3 0.5, running sums 0.05 0.2 0.5 1.
  // A token goes when its running sum is <= 1 - p.
  Tensor x = log_probs({0.05, 0.5, 0.15, 0.3});
  CHECK(kept(top_p_filter(x, 0.9)) == std::vector<int64_t>{0, 1, 1, 1});   // 1 - p = 0.1
  CHECK(kept(top_p_filter(x, 0.75)) == std::vector<int64_t>{0, 1, 0, 1});  // kept 0.8 >= 0.75
  CHECK(kept(top_p_filter(x, 0.45)) == std::vector<int64_t>{0, 1, 0, 0});  // 0.5 alone
  CHECK(kept(top_p_filter(x, 1e-9)) == std::vector<int64_t>{0, 1, 0, 0});  // always one
  CHECK(kept(top_p_filter(x, 1.0)) == std::vector<int64_t>{1, 1, 1, 1});
  // p = 1 removes only tokens of probability 0 (a -inf logit).
  CHECK(kept(top_p_filter(tensor({0, -kInf, 1}, kFloat64), 1.0)) == std::vector<int64_t>{1, 0, 1});
  // Rows are independent; the kept logits are unchanged.
  Tensor two = stack({x, log_probs({0.4, 0.1, 0.1, 0.4})});
  Tensor y = top_p_filter(two, 0.75);
  CHECK(kept(y) == std::vector<int64_t>{0, 1, 0, 1, 1, 0, 0, 1});
  CHECK(y.select(0, 0).select(0, 1).item<float>() == x.select(0, 1).item<float>());
  for (double p : {0.0, -0.5, 1.5, std::nan("")})
    CHECK_THROWS_WITH(top_p_filter(x, p), Contains("top_p_filter") && Contains("(0, 1]"));
  CHECK_THROWS_AS(top_p_filter(scalar_tensor(1.0), 0.5), ShapeError);
  CHECK_THROWS_AS(top_p_filter(ones({3}, kInt64), 0.5), DTypeError);
}

TEST_CASE("the filters pass the gradient of kept logits only; gradcheck through softmax",
          "[ops][sampling]") {
  Tensor x = tensor({{0.5, 3, -1, 2}}, kFloat64).requires_grad_();
  Tensor g = autograd::grad({top_k_filter(x, 2)}, {x}, {tensor({{1, 2, 3, 4}}, kFloat64)})[0];
  CHECK(g.to_vector<double>() == std::vector<double>{0, 2, 0, 4});
  using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<Fn> fns = {
      [](auto& v) { return softmax(top_k_filter(v[0], 3), -1); },
      [](auto& v) { return softmax(top_p_filter(v[0], 0.7), -1); },
      [](auto& v) { return softmax(apply_temperature(v[0], 0.6), -1); },
  };
  const std::vector<Tensor> inputs = {leaf({6}, 1), leaf({3, 7}, 2),
                                      leaf({7, 3}, 3).detach().t().requires_grad_(),
                                      leaf({2, 3, 5}, 4), leaf({1, 1}, 5)};
  for (const Fn& fn : fns)
    for (const Tensor& in : inputs) {
      INFO("shape " << shape_str(in.shape()));
      CHECK_GRADCHECK(fn, std::vector<Tensor>{in});
      CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{in});
    }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
