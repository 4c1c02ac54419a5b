// Forward and backward of the pointwise ops and activations against PyTorch (fixtures from
// tests/fixtures/gen_pointwise.py). Each case applies the same op as the script.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
using Unary = Tensor (*)(const Tensor&);
}  // namespace

TEST_CASE("parity: pointwise math", "[ops][parity]") {
  for (auto [op, f] : std::vector<std::pair<std::string, Unary>>{
           {"sin", sin}, {"cos", cos}, {"square", square}, {"erf", erf}}) {
    check_parity("pointwise", op, [f](auto& x) { return f(x[0]); });
    check_parity("pointwise", op + "_t", [f](auto& x) { return f(x[0].t()); });
  }
  check_parity("pointwise", "rsqrt", [](auto& x) { return rsqrt(x[0]); });
  check_parity("pointwise", "reciprocal", [](auto& x) { return reciprocal(x[0]); });
  check_parity("pointwise", "reciprocal_neg", [](auto& x) { return reciprocal(x[0]); });
}

TEST_CASE("parity: clamp", "[ops][parity]") {
  check_parity("pointwise", "clamp", [](auto& x) { return clamp(x[0], -0.5, 0.7); });
  check_parity("pointwise", "clamp_min", [](auto& x) { return clamp(x[0], 0.1, std::nullopt); });
  check_parity("pointwise", "clamp_max", [](auto& x) { return clamp(x[0], std::nullopt, -0.2); });
  check_parity("pointwise", "clamp_bounds", [](auto& x) { return clamp(x[0], -1.0, 1.0); });
  check_parity("pointwise", "clamp_min_gt_max", [](auto& x) { return clamp(x[0], 1.0, -1.0); });
}

TEST_CASE("parity: maximum and minimum, ties included", "[ops][parity]") {
  for (std::string variant : {"", "_ties", "_ties_broadcast"}) {
    check_parity("pointwise", "maximum" + variant, [](auto& x) { return maximum(x[0], x[1]); });
    check_parity("pointwise", "minimum" + variant, [](auto& x) { return minimum(x[0], x[1]); });
  }
}

TEST_CASE("parity: where and masked_fill", "[ops][parity]") {
  check_parity("pointwise", "where", [](auto& x) { return where(x[0], x[1], x[2]); });
  check_parity("pointwise", "where_3way", [](auto& x) { return where(x[0], x[1], x[2]); });
  check_parity("pointwise", "where_scalar", [](auto& x) { return where(x[0], x[1], -1.5); });
  check_parity("pointwise", "masked_fill", [](auto& x) { return masked_fill(x[0], x[1], -2.5); });
  check_parity("pointwise", "masked_fill_full",
               [](auto& x) { return masked_fill(x[0], x[1], 7.0); });
}

TEST_CASE("parity: gelu and silu", "[ops][parity]") {
  check_parity("pointwise", "gelu", [](auto& x) { return gelu(x[0]); });
  check_parity("pointwise", "gelu_t", [](auto& x) { return gelu(x[0].t()); });
  check_parity("pointwise", "gelu_tanh", [](auto& x) { return gelu(x[0], GeluApproximate::Tanh); });
  check_parity("pointwise", "silu", [](auto& x) { return silu(x[0]); });
  check_parity("pointwise", "silu_t", [](auto& x) { return silu(x[0].t()); });
  // the composite twin matches PyTorch too
  check_parity("pointwise", "gelu", [](auto& x) { return gelu_composite(x[0]); });
  check_parity("pointwise", "gelu_tanh",
               [](auto& x) { return gelu_composite(x[0], GeluApproximate::Tanh); });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
