// var, std, logsumexp, norm: gradcheck and gradgradcheck over dims on the standard shapes,
// values, PyTorch's conventions at zero / ties / infinities, numerical stability, errors.
#include <limits>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct DimsCase {
  Tensor x;
  std::vector<int64_t> dims;
  int64_t reduced;  // elements per output
};

// 0-d (all dims), a size-1 dim, two dims of a 3-D input, transposed, 4-D with negative dims,
// zero-size kept dim, and every dim (empty list).
std::vector<DimsCase> dims_cases() {
  return {{leaf({}, 1), {}, 1},
          {leaf({1, 3}, 2), {0}, 1},
          {leaf({2, 3, 4}, 3), {0, 2}, 8},
          {leaf({4, 3}, 4).detach().t().requires_grad_(), {1}, 4},
          {leaf({2, 1, 3, 2}, 5), {-1, 1}, 2},
          {leaf({0, 3}, 6), {1}, 3},
          {leaf({2, 3}, 7), {}, 6}};
}

void check_fn(const Fn& fn, const Tensor& x) {
  CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
  CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{x});
}

std::vector<double> grad_of(const Tensor& x, const Tensor& y) {
  return autograd::grad({sum(y)}, {x})[0].to_vector<double>();
}

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("var and std pass gradcheck and gradgradcheck", "[ops]") {
  for (auto& [x, dims, reduced] : dims_cases()) {
    INFO("shape " << shape_str(x.shape()) << " dims " << dims.size());
    const auto d = dims;
    for (bool keepdim : {false, true}) {
      check_fn([d, keepdim](auto& in) { return var(in[0], d, false, keepdim); }, x);
      check_fn([d, keepdim](auto& in) { return nabla::std(in[0], d, false, keepdim); }, x);
      if (reduced > 1) {  // N - 1 = 0 is NaN
        check_fn([d, keepdim](auto& in) { return var(in[0], d, true, keepdim); }, x);
        check_fn([d, keepdim](auto& in) { return nabla::std(in[0], d, true, keepdim); }, x);
      }
    }
  }
  check_fn([](auto& in) { return var(in[0]); }, leaf({2, 3}, 8));
  check_fn([](auto& in) { return nabla::std(in[0]); }, leaf({3, 2}, 9));
}

TEST_CASE("var and std values", "[ops]") {
  Tensor x = tensor({{1, 2}, {3, 4}}, kFloat64);
  CHECK(var(x).item<double>() == Approx(5.0 / 3).epsilon(1e-15));
  CHECK(var(x, {}, false).item<double>() == 1.25);
  CHECK(var(x, {1}).to_vector<double>() == std::vector<double>{0.5, 0.5});  // the dims overload
  CHECK(var(x, {0}, false, true).shape() == Shape{1, 2});
  CHECK(var(x, {0}, false, true).to_vector<double>() == std::vector<double>{1, 1});
  CHECK(nabla::std(x, {0}).to_vector<double>() ==
        std::vector<double>{std::sqrt(2.0), std::sqrt(2.0)});
  CHECK(nabla::std(x.t(), {1}, false).to_vector<double>() == std::vector<double>{1, 1});
  // float32 input, two-pass in double: a large offset does not destroy the variance
  Tensor shifted = add(tensor({1, 2, 3, 4}), 1e4);
  CHECK(var(shifted).item<float>() == Approx(5.0 / 3).epsilon(1e-6));
  // one element, unbiased: 0/0; empty: NaN (PyTorch)
  CHECK(std::isnan(var(tensor({3.0}, kFloat64)).item<double>()));
  CHECK(std::isnan(var(zeros({0})).item<float>()));
  CHECK(nabla::std(zeros({2, 0}), {1}).shape() == Shape{2});
}

TEST_CASE("std's gradient is 0 (not NaN) where std is 0", "[ops]") {
  Tensor x = tensor({{1, 1, 1}, {1, 2, 3}}, kFloat64).requires_grad_();
  auto g = grad_of(x, nabla::std(x, {1}));
  CHECK(g[0] == 0.0);
  CHECK(g[1] == 0.0);
  CHECK(g[2] == 0.0);
  CHECK(g[3] == Approx(-0.5));  // (x - mean) / ((N - 1) std) = -1 / 2
  // and so is the second derivative
  Tensor gx = autograd::grad({sum(nabla::std(x, {1}))}, {x}, {}, false, true)[0];
  Tensor gg = autograd::grad({sum(gx)}, {x})[0];
  for (double v : gg.to_vector<double>()) CHECK(std::isfinite(v));
}

TEST_CASE("logsumexp passes gradcheck and gradgradcheck", "[ops]") {
  for (auto& [x, dims, reduced] : dims_cases()) {
    INFO("shape " << shape_str(x.shape()) << " dims " << dims.size());
    const auto d = dims;
    check_fn([d](auto& in) { return logsumexp(in[0], d); }, x);
    check_fn([d](auto& in) { return logsumexp(in[0], d, true); }, x);
  }
}

TEST_CASE("logsumexp is stable for logits of magnitude 1e4", "[ops]") {
  // reference in float64 by hand: m + log(sum(exp(x - m)))
  const double ref = 1e4 + std::log(1.0 + std::exp(1.0) + std::exp(-2.0));
  Tensor x64 = tensor({1e4, 1e4 + 1, 1e4 - 2}, kFloat64);
  CHECK(logsumexp(x64, {0}).item<double>() == Approx(ref).epsilon(1e-15));
  Tensor x32 = x64.to(kFloat32);
  CHECK(std::isfinite(logsumexp(x32, {0}).item<float>()));
  CHECK(logsumexp(x32, {0}).item<float>() == static_cast<float>(ref));
  const double ref_neg = -1e4 + std::log(2.0);
  CHECK(logsumexp(tensor({-1e4, -1e4}, kFloat64), {0}).item<double>() ==
        Approx(ref_neg).epsilon(1e-15));
  CHECK(logsumexp(tensor({-1e4, -1e4}), {0}).item<float>() == static_cast<float>(ref_neg));
  // gradient = softmax, finite (exp(x - y) with x, y ~ 1e4 carries ~1e-12 relative error)
  Tensor x = x64.detach().requires_grad_();
  auto g = grad_of(x, logsumexp(x, {0}));
  const double z = 1.0 + std::exp(1.0) + std::exp(-2.0);
  CHECK(g[0] == Approx(1.0 / z).epsilon(1e-11));
  CHECK(g[1] == Approx(std::exp(1.0) / z).epsilon(1e-11));
  CHECK(g[2] == Approx(std::exp(-2.0) / z).epsilon(1e-11));
}

TEST_CASE("logsumexp with infinities and empty rows follows PyTorch", "[ops]") {
  Tensor x = tensor({{-kInf, -kInf}, {1.0, -kInf}, {kInf, 1.0}}, kFloat64).requires_grad_();
  Tensor y = logsumexp(x, {1});
  auto v = y.to_vector<double>();
  CHECK(v[0] == -kInf);  // an all -inf row
  CHECK(v[1] == 1.0);
  CHECK(v[2] == kInf);
  auto g = grad_of(x, y);
  CHECK(std::isnan(g[0]));  // PyTorch gives NaN here too: exp(-inf - -inf)
  CHECK(g[2] == 1.0);
  CHECK(g[3] == 0.0);  // exp(-inf - 1)
  CHECK(logsumexp(zeros({2, 0}), {1}).to_vector<float>() ==
        std::vector<float>(2, -std::numeric_limits<float>::infinity()));
}

TEST_CASE("norm passes gradcheck and gradgradcheck", "[ops]") {
  for (auto& [x, dims, reduced] : dims_cases()) {
    INFO("shape " << shape_str(x.shape()) << " dims " << dims.size());
    const auto d = dims;
    for (double p : {2.0, kInf}) {
      INFO("p " << p);
      check_fn([d, p](auto& in) { return norm(in[0], p, d); }, x);
      check_fn([d, p](auto& in) { return norm(in[0], p, d, true); }, x);
    }
  }
  check_fn([](auto& in) { return norm(in[0]); }, leaf({2, 3}, 8));
  check_fn([](auto& in) { return norm(in[0], kInf); }, leaf({2, 3}, 9));
}

TEST_CASE("norm values and gradients at zero and ties", "[ops]") {
  Tensor x = tensor({{3, -4}, {0, 0}}, kFloat64).requires_grad_();
  CHECK(norm(x, 2.0, {1}).to_vector<double>() == std::vector<double>{5, 0});
  CHECK(norm(x).item<double>() == 5.0);
  CHECK(norm(x, kInf, {1}).to_vector<double>() == std::vector<double>{4, 0});
  CHECK(norm(x, kInf).item<double>() == 4.0);
  // p = 2: the zero row gets gradient 0, not NaN
  CHECK_CLOSE(autograd::grad({sum(norm(x, 2.0, {1}))}, {x})[0],
              tensor({{0.6, -0.8}, {0.0, 0.0}}, kFloat64), 1e-15, 0);
  Tensor z = zeros({3}, kFloat64).requires_grad_();
  CHECK(grad_of(z, norm(z)) == std::vector<double>{0, 0, 0});
  CHECK(grad_of(z, norm(z, kInf)) == std::vector<double>{0, 0, 0});
  // p = inf: split evenly among ties, with the sign
  Tensor t = tensor({3.0, -3.0, 1.0}, kFloat64).requires_grad_();
  CHECK(grad_of(t, norm(t, kInf)) == std::vector<double>{0.5, -0.5, 0});
  CHECK(grad_of(x, norm(x, kInf, {1})) == std::vector<double>{0, -1, 0, 0});
  // empty rows: 0
  CHECK(norm(zeros({2, 0}), 2.0, {1}).to_vector<float>() == std::vector<float>{0, 0});
  CHECK(norm(zeros({2, 0}), kInf, {1}).to_vector<float>() == std::vector<float>{0, 0});
  CHECK(std::isnan(norm(tensor({1.0, NAN}), kInf).item<float>()));
}

TEST_CASE("statistics errors name the op, the dim and the shape", "[ops]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(var(x, {2}), ShapeError);
  CHECK_THROWS_WITH(var(x, {2}), Contains("var") && Contains("dim 2") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(nabla::std(x, {-3}),
                    Contains("std") && Contains("dim -3") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(logsumexp(x, {0, -2}),
                    Contains("logsumexp") && Contains("twice") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(norm(x, 2.0, {4}), Contains("norm") && Contains("dim 4"));
  CHECK_THROWS_AS(norm(x, 3.0), ValueError);
  CHECK_THROWS_WITH(norm(x, 1.0), Contains("norm") && Contains("p = 1"));
  CHECK_THROWS_AS(norm(x, -kInf), ValueError);
  CHECK_THROWS_AS(var(arange(3)), DTypeError);
  CHECK_THROWS_WITH(logsumexp(arange(3), {0}), Contains("logsumexp") && Contains("int64"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
