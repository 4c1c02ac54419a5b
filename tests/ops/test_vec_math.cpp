// vec_math's float32 exp and erf (used by the fused GELU kernels) against libm in float64.
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

}  // namespace NABLA_UNITY_ID
}  // namespace
