// Gradient clipping: norms by hand (2, 1, inf), clipping only above max_norm, non-contiguous
// gradients, parameters without gradients, value clipping, errors.
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;
using Catch::Matchers::Contains;

namespace {

Tensor with_grad(std::vector<double> g, DType dt = kFloat64) {
  const auto n = static_cast<int64_t>(g.size());
  Tensor p = zeros({n}, dt).requires_grad_();
  p.set_grad(from_vector<double>(g, {n}).to(dt));
  return p;
}

}  // namespace

TEST_CASE("clip_grad_norm_: total norm over all gradients, scaled only above max_norm", "[optim]") {
  Tensor a = with_grad({3, 4}), b = with_grad({-12}), none = zeros({2}).requires_grad_();
  std::vector<Tensor> ps = {a, none, b};
  SECTION("2-norm, clipped") {
    CHECK(clip_grad_norm_(ps, 1.0) == Approx(13.0).epsilon(1e-15));
    const double c = 1.0 / (13.0 + 1e-6);
    CHECK_CLOSE(a.grad(), from_vector<double>({3 * c, 4 * c}, {2}), 1e-15, 0);
    CHECK_CLOSE(b.grad(), from_vector<double>({-12 * c}, {1}), 1e-15, 0);
    CHECK(!none.grad().defined());
  }
  SECTION("below max_norm nothing changes") {
    CHECK(clip_grad_norm_(ps, 100.0) == Approx(13.0));
    CHECK(a.grad().to_vector<double>() == std::vector<double>{3, 4});
  }
  SECTION("inf-norm and 1-norm") {
    CHECK(clip_grad_norm_(ps, 6.0, INFINITY) == 12.0);
    CHECK(b.grad().item<double>() == Approx(-6.0).epsilon(1e-6));
    Tensor c = with_grad({1, -2}), d = with_grad({3});
    CHECK(clip_grad_norm_({c, d}, 100.0, 1.0) == Approx(6.0));
    CHECK(clip_grad_norm_({c, d}, 100.0, 3.0) == Approx(std::cbrt(36.0)));
  }
  SECTION("float32 gradients, non-contiguous gradient") {
    Tensor p = zeros({2, 2}).requires_grad_();
    p.set_grad(from_vector<float>({3, 0, 4, 0}, {2, 2}).t());  // transposed view
    CHECK(clip_grad_norm_({p}, 2.5) == Approx(5.0));
    CHECK_CLOSE(p.grad(), from_vector<float>({1.5f, 2.0f, 0, 0}, {2, 2}), 1e-6, 0);
  }
  SECTION("no gradients at all") { CHECK(clip_grad_norm_({none}, 1.0) == 0.0); }
  SECTION("errors") {
    CHECK_THROWS_WITH(clip_grad_norm_(ps, 1.0, 0.0), Contains("norm_type"));
    Tensor n = with_grad({NAN, 1});
    CHECK_THROWS_WITH(clip_grad_norm_({n}, 1.0, 2.0, /*error_if_nonfinite=*/true),
                      Contains("non-finite"));
    CHECK(std::isnan(clip_grad_norm_({n}, 1.0)));
  }
}

TEST_CASE("clip_grad_value_ clamps every element", "[optim]") {
  Tensor a = with_grad({-3, 0.5, 2}), b = with_grad({7}, kFloat32);
  clip_grad_value_({a, b}, 1.0);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{-1, 0.5, 1});
  CHECK(b.grad().to_vector<float>() == std::vector<float>{1});
  CHECK_THROWS_AS(clip_grad_value_({a}, -1.0), ValueError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
