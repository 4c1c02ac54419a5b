// Semantics the op database does not state: exact values at PyTorch's conventions (rounding
// halves, remainder signs, kinks, saturation without overflow), any/all/isnan/isfinite on every
// dtype, bool sums, the scalar-first overloads, Generator::uniform/normal, the nn modules and
// the error messages. Gradcheck on the standard shapes is in tests/op_db/ops_pointwise_more.cpp.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {
Tensor vec(const std::vector<double>& v, DType dt = kFloat64) {
  return from_vector<double>(v, {static_cast<int64_t>(v.size())}).to(dt);
}
std::vector<double> values_of(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }
}  // namespace

TEST_CASE("round: halves to even, like torch.round; floor/ceil; int64 unchanged", "[ops]") {
  for (DType dt : {kFloat32, kFloat64}) {
    CHECK(values_of(round(vec({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5}, dt))) ==
          std::vector<double>{-2, -2, -0.0, 0, 2, 2, 4});
    CHECK(std::signbit(values_of(round(vec({-0.5}, dt)))[0]));  // -0, as PyTorch
    CHECK(values_of(floor(vec({-1.5, 1.5}, dt))) == std::vector<double>{-2, 1});
    CHECK(values_of(ceil(vec({-1.5, 1.5}, dt))) == std::vector<double>{-1, 2});
  }
  Tensor i = arange(-3, 3);
  CHECK(round(i).dtype() == kInt64);
  CHECK(floor(i).to_vector<int64_t>() == i.to_vector<int64_t>());
  Tensor x = vec({0.3, 1.7}).requires_grad_();
  auto g = autograd::grad({sum(round(x))}, {x});
  CHECK(values_of(g[0]) == std::vector<double>{0, 0});
}

TEST_CASE("fmod keeps the dividend's sign, remainder the divisor's (C fmod vs Python %)", "[ops]") {
  Tensor a = vec({3, -3, 3, -3}), b = vec({2, 2, -2, -2});
  CHECK(values_of(fmod(a, b)) == std::vector<double>{1, -1, 1, -1});
  CHECK(values_of(remainder(a, b)) == std::vector<double>{1, 1, -1, -1});
  CHECK(values_of(remainder(vec({-0.5}), 3.0)) == std::vector<double>{2.5});
  CHECK(std::isnan(values_of(fmod(vec({1}), 0.0))[0]));
  CHECK_THROWS_WITH(fmod(arange(3), arange(3)), Contains("fmod"));
}

TEST_CASE("activations: kinks follow PyTorch, saturation does not overflow", "[ops]") {
  Tensor x = vec({-1, 0, 1}).requires_grad_();
  CHECK(values_of(autograd::grad({sum(leaky_relu(x, 0.1))}, {x})[0]) ==
        std::vector<double>{0.1, 0.1, 1});
  CHECK(values_of(autograd::grad({sum(elu(x, 2.0))}, {x})[0])[1] == 2.0);
  CHECK(values_of(autograd::grad({sum(hardtanh(x))}, {x})[0]) == std::vector<double>{0, 1, 0});
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor big = vec({-1e4, 1e4}, dt);
    CHECK(values_of(softplus(big)) == std::vector<double>{0, 1e4});
    CHECK(values_of(log_sigmoid(big)) == std::vector<double>{-1e4, 0});
    CHECK(values_of(mish(big)) == std::vector<double>{-0.0, 1e4});
  }
  CHECK(values_of(log1p(vec({1e-20})))[0] == 1e-20);  // log(1 + x) would give 0
  CHECK(values_of(expm1(vec({1e-20})))[0] == 1e-20);
  CHECK_THROWS_AS(softplus(vec({1}), 0.0), ValueError);
  CHECK_THROWS_WITH(hardtanh(vec({1}), 1.0, -1.0), Contains("hardtanh") && Contains("min_val"));
}

TEST_CASE("activations on NaN and infinities: values and gradients as PyTorch's", "[ops]") {
  // Checked against torch 1.13 on (nan, -inf, inf, -2, 3): every activation keeps a NaN, and
  // the backward rules written as `x <= bound ? ... : grad` (elu, hardtanh, relu) pass the
  // gradient at a NaN x; elu and hardtanh gave NaN and 0 there before.
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    Tensor x = from_vector<double>(std::vector<double>{nan, -inf, inf, -2.0, 3.0}, {5})
                   .to(dt)
                   .requires_grad_();
    std::vector<double> y = values_of(elu(x, 1.0)),
                        g = values_of(autograd::grad({sum(elu(x, 1.0))}, {x})[0]);
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == -1.0);
    CHECK(y[2] == inf);
    CHECK(g[0] == 1.0);
    CHECK(g[1] == 0.0);
    CHECK(g[2] == 1.0);
    y = values_of(hardtanh(x));
    g = values_of(autograd::grad({sum(hardtanh(x))}, {x})[0]);
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == -1.0);
    CHECK(y[2] == 1.0);
    CHECK(g == std::vector<double>{1, 0, 0, 0, 0});
  }
}

TEST_CASE("any/all/isnan/isfinite on every dtype, empty inputs as PyTorch", "[ops]") {
  CHECK(any(vec({0, std::nan("")})).item<bool>());  // NaN is nonzero
  CHECK_FALSE(all(vec({1, 0})).item<bool>());
  CHECK(all(zeros({0})).item<bool>());
  CHECK_FALSE(any(zeros({0})).item<bool>());
  CHECK(any(arange(3)).item<bool>());
  CHECK_FALSE(all(arange(3)).item<bool>());
  Tensor m = from_vector<double>({1, 0, 1, 1}, {2, 2}).to(kBool);
  CHECK(values_of(all(m, -1)) == std::vector<double>{0, 1});
  CHECK(any(m, 0, true).shape() == Shape{1, 2});
  CHECK_THROWS_WITH(any(m, 2), Contains("any"));
  CHECK(values_of(isnan(arange(2))) == std::vector<double>{0, 0});
  CHECK(values_of(isfinite(ones({2}, kBool))) == std::vector<double>{1, 1});
  CHECK(values_of(isfinite(vec({1, INFINITY, std::nan("")}, kFloat32))) ==
        std::vector<double>{1, 0, 0});
}

TEST_CASE("sum of bool counts into int64; mean of bool is refused as in torch 1.13", "[ops]") {
  Tensor b = gt(vec({1, -1, 2, 3}), 0.0);
  Tensor s = sum(b);
  CHECK(s.dtype() == kInt64);
  CHECK(s.item<int64_t>() == 3);
  CHECK(sum(eq(arange(4), arange(4)), {0}, true).shape() == Shape{1});
  CHECK_THROWS_AS(mean(b), DTypeError);
  CHECK_THROWS_WITH(mean(b), Contains("mean") && Contains("bool") && Contains("to(kFloat32)"));
}

TEST_CASE("scalar-first add sub mul div pow", "[ops]") {
  Tensor x = vec({1, 2, 4});
  CHECK(values_of(sub(1.0, x)) == std::vector<double>{0, -1, -3});
  CHECK(values_of(div(1.0, x)) == std::vector<double>{1, 0.5, 0.25});
  CHECK(values_of(pow(2.0, x)) == std::vector<double>{2, 4, 16});
  CHECK(values_of(add(1.0, x)) == std::vector<double>{2, 3, 5});
  CHECK(values_of(mul(3.0, x)) == std::vector<double>{3, 6, 12});
  CHECK(sub(1.0, arange(3)).dtype() == kInt64);
  CHECK_THROWS_WITH(sub(0.5, arange(3)), Contains("sub"));
  CHECK_THROWS_WITH(pow(2.0, arange(3)), Contains("pow"));
  Tensor e = vec({2, 0, -1}).requires_grad_();
  auto g = autograd::grad({sum(pow(0.0, e))}, {e});
  CHECK(values_of(g[0])[0] == 0.0);  // 0^e has gradient 0 for e >= 0, as PyTorch
  CHECK(values_of(g[0])[1] == 0.0);
}

TEST_CASE("Generator::uniform and normal: rand and randn are the (0, 1) case", "[ops]") {
  Generator a(7), b(7);
  Tensor u = a.uniform({1000}, -2.0, 3.0, kFloat64);
  Tensor r = rand({1000}, b, kFloat64);
  CHECK_CLOSE(u, add(mul(r, 5.0), -2.0), 1e-12, 0);
  CHECK(a.offset() == b.offset());
  const std::vector<double> uv = values_of(u);
  CHECK(*std::min_element(uv.begin(), uv.end()) >= -2.0);
  CHECK(*std::max_element(uv.begin(), uv.end()) < 3.0);
  Generator c(9), d(9);
  CHECK_CLOSE(c.normal({500}, 1.0, 0.5), add(mul(randn({500}, d), 0.5), 1.0), 1e-6, 1e-6);
  Generator e(1), f(1);  // rand is exactly uniform(0, 1): one code path
  CHECK(values_of(e.uniform({8}, 0.0, 1.0)) == values_of(rand({8}, f)));
  CHECK_THROWS_AS(a.uniform({2}, 1.0, 0.0), ValueError);
  CHECK_THROWS_AS(a.normal({2}, 0.0, -1.0), ValueError);
  CHECK_THROWS_WITH(a.uniform({2}, 0.0, 1.0, kInt64), Contains("uniform"));
}

TEST_CASE("nn activation modules wrap the ops with PyTorch's defaults", "[ops][nn]") {
  Tensor x = vec({-3, -0.5, 0, 0.5, 3});
  CHECK(values_of(nn::Softplus()(x)) == values_of(softplus(x)));
  CHECK(values_of(nn::Softplus(2.0, 1.0)(x)) == values_of(softplus(x, 2.0, 1.0)));
  CHECK(values_of(nn::LeakyReLU()(x)) == values_of(leaky_relu(x, 0.01)));
  CHECK(values_of(nn::ELU(0.5)(x)) == values_of(elu(x, 0.5)));
  CHECK(values_of(nn::Mish()(x)) == values_of(mish(x)));
  CHECK(values_of(nn::Hardtanh()(x)) == std::vector<double>{-1, -0.5, 0, 0.5, 1});
  CHECK(values_of(nn::LogSigmoid()(x)) == values_of(log_sigmoid(x)));
  CHECK(nn::Mish().parameters().empty());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
