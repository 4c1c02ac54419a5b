// max/min (along a dim and over all elements), argmax/argmin and cumsum: gradcheck and
// gradgradcheck on the standard shapes, PyTorch's tie and NaN rules, errors.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void check_fn(const Fn& fn, const Tensor& x) {
  CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
  CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{x});
}

struct DimCase {
  Tensor x;
  int64_t dim;
};

// 0-d, reducing a size-1 dim, 3-D middle dim, transposed, 4-D last dim, zero-size kept dim.
std::vector<DimCase> dim_cases() {
  return {{leaf({}, 1), 0},
          {leaf({1, 3}, 2), 0},
          {leaf({2, 3, 4}, 3), 1},
          {leaf({4, 3}, 4).detach().t().requires_grad_(), 0},
          {leaf({2, 1, 3, 2}, 5), -1},
          {leaf({0, 3}, 6), 1}};
}

std::vector<double> grad_of(const Tensor& x, const Tensor& y) {
  return autograd::grad({sum(y)}, {x})[0].to_vector<double>();
}

}  // namespace

TEST_CASE("max and min along a dim pass gradcheck and gradgradcheck", "[ops]") {
  for (auto& [x, dim] : dim_cases()) {
    INFO("shape " << shape_str(x.shape()) << " dim " << dim);
    const int64_t d = dim;
    for (bool keepdim : {false, true}) {
      check_fn([d, keepdim](auto& in) { return max(in[0], d, keepdim).values; }, x);
      check_fn([d, keepdim](auto& in) { return min(in[0], d, keepdim).values; }, x);
    }
  }
}

TEST_CASE("max and min over all elements pass gradcheck and gradgradcheck", "[ops]") {
  for (auto& [x, dim] : dim_cases()) {
    if (x.numel() == 0) continue;
    INFO("shape " << shape_str(x.shape()));
    check_fn([](auto& in) { return max(in[0]); }, x);
    check_fn([](auto& in) { return min(in[0]); }, x);
  }
}

TEST_CASE("max and min values, indices and shapes", "[ops]") {
  Tensor x = tensor({{1, 5, 2}, {7, 0, 7}});
  auto [v, i] = max(x, 1);
  CHECK(v.to_vector<float>() == std::vector<float>{5, 7});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // first of the tied 7s
  CHECK(i.dtype() == kInt64);
  auto [vn, in] = min(x, 0, true);
  CHECK(vn.shape() == Shape{1, 3});
  CHECK(vn.to_vector<float>() == std::vector<float>{1, 0, 2});
  CHECK(in.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK(max(x).item<float>() == 7.f);
  CHECK(min(x).item<float>() == 0.f);
  CHECK(max(x).shape() == Shape{});
  // transposed input
  CHECK(max(x.t(), 0).indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  // int64
  CHECK(max(arange(5), 0).values.item<int64_t>() == 4);
  CHECK(min(arange(5)).item<int64_t>() == 0);
  // zero-size kept dim: empty result
  CHECK(max(zeros({0, 3}), 1).values.shape() == Shape{0});
  // 0-d
  CHECK(max(scalar_tensor(3.0), 0).indices.item<int64_t>() == 0);
}

TEST_CASE("max and min gradients at ties and NaN follow PyTorch", "[ops]") {
  Tensor x = tensor({{1, 3, 3, 2}}, kFloat64).requires_grad_();
  // over all elements: split evenly among ties
  CHECK(grad_of(x, max(x)) == std::vector<double>{0, 0.5, 0.5, 0});
  // along a dim: all to the returned (first) index
  CHECK(grad_of(x, max(x, 1).values) == std::vector<double>{0, 1, 0, 0});
  Tensor y = tensor({{2, 1, 1}}, kFloat64).requires_grad_();
  CHECK(grad_of(y, min(y)) == std::vector<double>{0, 0.5, 0.5});
  CHECK(grad_of(y, min(y, -1, true).values) == std::vector<double>{0, 1, 0});
  // NaN wins (the first one) and takes the gradient
  Tensor n = tensor({1.0, NAN, 3.0, NAN}, kFloat64).requires_grad_();
  auto [v, i] = max(n, 0);
  CHECK(std::isnan(v.item<double>()));
  CHECK(i.item<int64_t>() == 1);
  CHECK(min(n, 0).indices.item<int64_t>() == 1);
  CHECK(std::isnan(max(n).item<double>()));
  CHECK(grad_of(n, max(n)) == std::vector<double>{0, 0.5, 0, 0.5});
  CHECK(grad_of(n, max(n, 0).values) == std::vector<double>{0, 1, 0, 0});
}

TEST_CASE("argmax and argmin", "[ops]") {
  Tensor x = tensor({{1, 5, 5}, {7, 0, 0}});
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(argmin(x, 1).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(argmax(x, 0, true).shape() == Shape{1, 3});
  CHECK(argmax(x, 0, true).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  CHECK(argmax(x).item<int64_t>() == 3);  // flattened
  CHECK(argmin(x).item<int64_t>() == 4);  // first of the tied zeros
  CHECK(argmax(x.t()).item<int64_t>() == 1);
  CHECK(argmax(x).dtype() == kInt64);
  CHECK(argmax(tensor({1.0, NAN, 3.0})).item<int64_t>() == 1);
  CHECK(argmin(tensor({1.0, NAN, 0.0})).item<int64_t>() == 1);
  CHECK(argmax(arange(4).view({2, 2}), -1).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(!argmax(leaf({3}, 1), 0).requires_grad());
}

TEST_CASE("max min argmax argmin errors name the dim and the shape", "[ops]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(max(x, 2), ShapeError);
  CHECK_THROWS_WITH(max(x, 2), Contains("max") && Contains("dim 2") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(min(x, -3), Contains("min") && Contains("dim -3") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(argmax(x, 5), Contains("argmax") && Contains("dim 5") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(argmin(scalar_tensor(1), 1), Contains("argmin") && Contains("dim 1"));
  // reducing a dim of size 0 has no answer
  CHECK_THROWS_AS(max(zeros({2, 0}), 1), ShapeError);
  CHECK_THROWS_WITH(max(zeros({2, 0}), 1), Contains("max") && Contains("(2, 0)"));
  CHECK_THROWS_WITH(max(zeros({0, 3})), Contains("max") && Contains("(0, 3)"));
  CHECK_THROWS_WITH(argmin(zeros({0})), Contains("argmin") && Contains("(0,)"));
  CHECK_THROWS_AS(max(zeros({3}, kBool), 0), DTypeError);
}

TEST_CASE("cumsum passes gradcheck and gradgradcheck", "[ops]") {
  for (auto& [x, dim] : dim_cases()) {
    INFO("shape " << shape_str(x.shape()) << " dim " << dim);
    const int64_t d = dim;
    check_fn([d](auto& in) { return cumsum(in[0], d); }, x);
    if (x.dim() >= 2) check_fn([](auto& in) { return cumsum(in[0], 0); }, x);
  }
  // gradgradcheck of the reversed scan, reached through the double backward
  Fn first = [](auto& in) {
    EnableGradGuard grad_mode;  // gradcheck evaluates fn under no-grad
    Tensor y = cumsum(in[0], 1);
    return autograd::grad({y}, {in[0]}, {mul(y, y)}, true, true)[0];
  };
  CHECK_GRADGRADCHECK(first, std::vector<Tensor>{leaf({2, 4}, 7)});
}

TEST_CASE("cumsum values and errors", "[ops]") {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, kFloat64).requires_grad_();
  CHECK(cumsum(x, 1).to_vector<double>() == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(cumsum(x, 0).to_vector<double>() == std::vector<double>{1, 2, 3, 5, 7, 9});
  CHECK(cumsum(x.t(), 1).to_vector<double>() == std::vector<double>{1, 5, 2, 7, 3, 9});
  // backward = reversed cumsum of the gradient
  CHECK(grad_of(x, cumsum(x, 1)) == std::vector<double>{3, 2, 1, 3, 2, 1});
  CHECK(cumsum(arange(4), 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 3, 6});
  CHECK(cumsum(arange(4), 0).dtype() == kInt64);
  CHECK(cumsum(zeros({2, 0}), 1).shape() == Shape{2, 0});
  CHECK(cumsum(scalar_tensor(2.0), 0).item<float>() == 2.f);
  // float32 accumulates in double: 1e8 + many ones is not lost
  Tensor big = ones({1001});
  {
    NoGradGuard g;
    big.select(0, 0).fill_(1e8);
  }
  CHECK(cumsum(big, 0).to_vector<float>().back() == 100001000.f);
  CHECK_THROWS_AS(cumsum(x, 2), ShapeError);
  CHECK_THROWS_WITH(cumsum(x, 2), Contains("cumsum") && Contains("dim 2") && Contains("(2, 3)"));
  CHECK_THROWS_AS(cumsum(zeros({2}, kBool), 0), DTypeError);
}

TEST_CASE("sum of one long row is exact (regression: the inner loop raced across threads)",
          "[ops]") {
  const int prev = num_threads();
  set_num_threads(2);
  for (int i = 0; i < 5; ++i) {
    CHECK(sum(ones({1 << 20}, kFloat64)).item<double>() == double(1 << 20));
    CHECK(sum(ones({2, 1 << 17}, kFloat64), {1}).to_vector<double>() ==
          std::vector<double>(2, double(1 << 17)));
  }
  set_num_threads(prev);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
