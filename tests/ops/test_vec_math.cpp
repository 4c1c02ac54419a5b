// vec_math's float32 exp, tanh and erf (the fused GELU kernels, tanh and sigmoid) against libm
// in float64.
#include "nabla/ops/vec_math.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

TEST_CASE("vec_math::exp is within a few ulp of exp over its range", "[ops]") {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const double got = nabla::vec_math::exp(x);
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  CHECK(worst < 4e-7);  // float32's ulp is 1.2e-7 relative
  CHECK(nabla::vec_math::exp(0.0f) == 1.0f);
  CHECK(nabla::vec_math::exp(-1000.0f) == 0.0f);
  CHECK(nabla::vec_math::exp(-std::numeric_limits<float>::infinity()) == 0.0f);  // masked softmax
  CHECK(std::isfinite(nabla::vec_math::exp(1000.0f)));
  CHECK(std::isnan(nabla::vec_math::exp(std::nanf(""))));
}

TEST_CASE("vec_math::erf is within 5e-7 of erf, odd, and saturates", "[ops]") {
  double worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 0.001f) {
    const double want = std::erf(static_cast<double>(x));
    worst = std::max(worst, std::fabs(nabla::vec_math::erf(x) - want));
    CHECK(nabla::vec_math::erf(-x) == -nabla::vec_math::erf(x));
  }
  CHECK(worst < 5e-7);  // A&S's 1.5e-7 plus float32 rounding
  CHECK(nabla::vec_math::erf(0.0f) == 0.0f);
  CHECK(nabla::vec_math::erf(10.0f) == 1.0f);
}

TEST_CASE("vec_math::tanh is within 4 ulp of tanh, odd, exact at 0 and saturates", "[ops]") {
  // Relative error in units of float32's ulp at the true value, both sides of the switch at
  // |x| = 0.5 and the tiny values where x itself is the answer.
  double worst_ulp = 0;
  auto check = [&](float x) {
    const double want = std::tanh(static_cast<double>(x));
    const float got = nabla::vec_math::tanh(x);
    if (want == 0) return;
    const auto w = static_cast<float>(std::fabs(want));
    const double ulp = std::nextafter(w, 2.0f) - w;
    worst_ulp = std::max(worst_ulp, std::fabs(got - want) / ulp);
    CHECK(nabla::vec_math::tanh(-x) == -got);
  };
  for (float x = -12.0f; x <= 12.0f; x += 0.000731f) check(x);
  for (float x = 1e-30f; x < 1.0f; x *= 1.37f) check(x);
  CHECK(worst_ulp <= 4.0);
  CHECK(nabla::vec_math::tanh(0.0f) == 0.0f);
  CHECK(std::signbit(nabla::vec_math::tanh(-0.0f)));
  CHECK(nabla::vec_math::tanh(20.0f) == 1.0f);
  CHECK(nabla::vec_math::tanh(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(std::isnan(nabla::vec_math::tanh(std::nanf(""))));
}

TEST_CASE("float32 sigmoid and tanh tensors agree with float64 to a few ulp", "[ops]") {
  // The tensor ops run vec_math in float32 and libm in float64; compare the two on long runs.
  using namespace nabla;
  Tensor x64 = mul(randn({50001}, kFloat64), 6.0);
  for (auto* op : {&sigmoid, &tanh}) {
    const std::vector<float> got = op(x64.to(kFloat32)).to_vector<float>();
    const std::vector<double> want = op(x64.to(kFloat32).to(kFloat64)).to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), 1e-30));
    CHECK(worst < 6e-7);  // a few ulp of float32 (1.2e-7 relative)
  }
  Tensor edges = tensor({-200.0, -90.0, -20.0, 0.0, 20.0, 90.0, 200.0});
  const std::vector<float> s = sigmoid(edges).to_vector<float>();
  CHECK(s[0] == 0.0f);
  CHECK(s[3] == 0.5f);
  CHECK(s[5] == 1.0f);
  CHECK(s[6] == 1.0f);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
