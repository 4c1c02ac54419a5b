// GELU (fused, both forms) and SiLU: gradcheck, gradgradcheck, known values, and the fused gelu
// against its composite twin (forward 1e-6, first and second derivatives 1e-5).
#include <numbers>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::vector<Tensor> activation_inputs() {
  Tensor transposed = leaf({3, 4}, 5).detach().t().requires_grad_();
  // scaled so that both tails of the curves are exercised
  Tensor wide = mul(leaf({7}, 6).detach(), 3.0).requires_grad_();
  return {leaf({}, 1), leaf({1, 3}, 2), leaf({2, 3, 1, 2}, 3), leaf({0, 3}, 4), transposed, wide};
}

void check_activation(const Fn& fn) {
  for (const Tensor& x : activation_inputs()) {
    INFO("shape " << shape_str(x.shape()) << (x.is_contiguous() ? "" : " (transposed)"));
    CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
    CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{x});
  }
}

}  // namespace

TEST_CASE("gelu and silu pass gradcheck and gradgradcheck", "[ops]") {
  SECTION("gelu exact") {
    check_activation([](auto& in) { return gelu(in[0]); });
  }
  SECTION("gelu tanh") {
    check_activation([](auto& in) { return gelu(in[0], GeluApproximate::Tanh); });
  }
  SECTION("gelu third order") {
    // grad of (grad of gelu) is itself recorded: check it with gradgradcheck one level up.
    for (auto a : {GeluApproximate::None, GeluApproximate::Tanh}) {
      Fn first = [a](auto& in) {
        EnableGradGuard grad_mode;  // gradcheck evaluates fn under no-grad
        Tensor y = gelu(in[0], a);
        return autograd::grad({y}, {in[0]}, {ones_like(y)}, true, true)[0];
      };
      CHECK_GRADGRADCHECK(first, std::vector<Tensor>{leaf({2, 3}, 9)});
    }
  }
  SECTION("silu") {
    check_activation([](auto& in) { return silu(in[0]); });
  }
}

TEST_CASE("gelu agrees with its composite twin, forward and backward", "[ops]") {
  Generator gen(42);
  for (int trial = 0; trial < 6; ++trial) {
    // random rank 0..3, sizes 0..4, values with a wide spread
    Shape shape;
    const int64_t rank = randint(0, 4, {}, gen).item<int64_t>();
    for (int64_t d = 0; d < rank; ++d) shape.push_back(randint(0, 5, {}, gen).item<int64_t>());
    for (auto a : {GeluApproximate::None, GeluApproximate::Tanh}) {
      INFO("shape " << shape_str(shape) << (a == GeluApproximate::Tanh ? " tanh" : " exact"));
      Tensor x = mul(randn(shape, gen, kFloat64), 4.0).requires_grad_();
      Tensor g = randn(shape, gen, kFloat64);
      Tensor y_fused = gelu(x, a), y_comp = gelu_composite(x, a);
      CHECK_CLOSE(y_fused, y_comp, 1e-6, 0);
      Tensor dx_fused = autograd::grad({y_fused}, {x}, {g}, false, true)[0];
      Tensor dx_comp = autograd::grad({y_comp}, {x}, {g}, false, true)[0];
      CHECK_CLOSE(dx_fused, dx_comp, 1e-5, 0);
      // second derivatives: d/dx <dx, v>
      if (x.numel() == 0) continue;
      Tensor v = randn(shape, gen, kFloat64);
      Tensor ddx_fused = autograd::grad({sum(mul(dx_fused, v))}, {x})[0];
      Tensor ddx_comp = autograd::grad({sum(mul(dx_comp, v))}, {x})[0];
      CHECK_CLOSE(ddx_fused, ddx_comp, 1e-5, 0);
    }
  }
}

TEST_CASE("gelu and silu values", "[ops]") {
  Tensor x = tensor({-3.0, -1.0, 0.0, 1.0, 2.0}, kFloat64);
  // x * Phi(x), Phi from erfc for full precision
  std::vector<double> exact;
  for (double v : x.to_vector<double>()) exact.push_back(v * 0.5 * std::erfc(-v / std::sqrt(2.0)));
  CHECK_CLOSE(gelu(x), from_vector(exact, {5}), 1e-15, 1e-14);
  // tanh form at 1: 0.5 (1 + tanh(sqrt(2/pi) * 1.044715))
  const double t1 = 0.5 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * 1.044715));
  CHECK(gelu(tensor({1.0}, kFloat64), GeluApproximate::Tanh).item<double>() ==
        Approx(t1).epsilon(1e-14));
  CHECK_CLOSE(silu(x), mul(x, sigmoid(x)), 1e-15, 1e-14);
  // far tails stay finite
  Tensor big = tensor({-1000.0, 1000.0});
  CHECK(gelu(big).to_vector<float>() == std::vector<float>{-0.f, 1000.f});
  CHECK(gelu(big, GeluApproximate::Tanh).to_vector<float>() == std::vector<float>{-0.f, 1000.f});
  CHECK(silu(big).to_vector<float>() == std::vector<float>{-0.f, 1000.f});
  CHECK_THROWS_AS(gelu(arange(3)), DTypeError);
  CHECK_THROWS_WITH(silu(arange(3)), Contains("silu") && Contains("int64"));
}

TEST_CASE("fused gelu is recorded as one differentiable node", "[ops]") {
  Tensor x = leaf({2, 3}, 1);
  Tensor y = gelu(x);
  REQUIRE(y.grad_fn());
  CHECK(std::string(y.grad_fn()->name()) == "GeluBackward");
  CHECK(y.grad_fn()->backward_is_differentiable());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
