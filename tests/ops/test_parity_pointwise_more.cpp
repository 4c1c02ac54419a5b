// Forward and backward of the activations, rounding, remainders, lerp, atan2, clamp by tensors,
// scalar-first arithmetic and the logical tests against PyTorch (fixtures from
// tests/fixtures/gen_pointwise_more.py). Each case applies the same op as the script.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
const char* kFamily = "pointwise_more";
}  // namespace

TEST_CASE("parity: softplus leaky_relu elu mish hardtanh log_sigmoid log1p expm1",
          "[ops][parity]") {
  check_parity(kFamily, "softplus", [](auto& x) { return softplus(x[0]); });
  check_parity(kFamily, "softplus_beta", [](auto& x) { return softplus(x[0], 2.0, 5.0); });
  check_parity(kFamily, "softplus_edges", [](auto& x) { return softplus(x[0]); });
  check_parity(kFamily, "softplus_t", [](auto& x) { return softplus(x[0].t()); });
  check_parity(kFamily, "leaky_relu", [](auto& x) { return leaky_relu(x[0]); });
  check_parity(kFamily, "leaky_relu_slope", [](auto& x) { return leaky_relu(x[0], 0.2); });
  check_parity(kFamily, "elu", [](auto& x) { return elu(x[0]); });
  check_parity(kFamily, "elu_alpha", [](auto& x) { return elu(x[0], 1.5); });
  check_parity(kFamily, "mish", [](auto& x) { return mish(x[0]); });
  check_parity(kFamily, "mish_edges", [](auto& x) { return mish(x[0]); });
  check_parity(kFamily, "mish_t", [](auto& x) { return mish(x[0].t()); });
  check_parity(kFamily, "hardtanh", [](auto& x) { return hardtanh(x[0]); });
  check_parity(kFamily, "hardtanh_bounds", [](auto& x) { return hardtanh(x[0], -0.5, 2.0); });
  check_parity(kFamily, "log_sigmoid", [](auto& x) { return log_sigmoid(x[0]); });
  check_parity(kFamily, "log_sigmoid_edges", [](auto& x) { return log_sigmoid(x[0]); });
  check_parity(kFamily, "log1p", [](auto& x) { return log1p(x[0]); });
  check_parity(kFamily, "log1p_tiny", [](auto& x) { return log1p(x[0]); });
  check_parity(kFamily, "expm1", [](auto& x) { return expm1(x[0]); });
  check_parity(kFamily, "expm1_tiny", [](auto& x) { return expm1(x[0]); });
}

TEST_CASE("parity: floor ceil round (half to even) and their zero gradients", "[ops][parity]") {
  using Unary = Tensor (*)(const Tensor&);
  for (auto [name, f] : std::vector<std::pair<std::string, Unary>>{
           {"floor", floor}, {"ceil", ceil}, {"round", round}}) {
    check_parity(kFamily, name, [f](auto& x) { return f(x[0]); });
    check_parity(kFamily, name + "_rand", [f](auto& x) { return f(x[0]); });
  }
}

TEST_CASE("parity: fmod and remainder, every sign", "[ops][parity]") {
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  using Scalar = Tensor (*)(const Tensor&, double);
  for (auto [name, f, fs] : std::vector<std::tuple<std::string, Binary, Scalar>>{
           {"fmod", fmod, fmod}, {"remainder", remainder, remainder}}) {
    for (std::string v : {"_signs", "", "_negdiv"})
      check_parity(kFamily, name + v, [f](auto& x) { return f(x[0], x[1]); });
    check_parity(kFamily, name + "_scalar", [fs](auto& x) { return fs(x[0], -1.5); });
  }
}

TEST_CASE("parity: atan2, lerp, clamp by tensors", "[ops][parity]") {
  check_parity(kFamily, "atan2", [](auto& x) { return atan2(x[0], x[1]); });
  check_parity(kFamily, "atan2_quadrants", [](auto& x) { return atan2(x[0], x[1]); });
  check_parity(kFamily, "lerp_scalar", [](auto& x) { return lerp(x[0], x[1], 0.3); });
  check_parity(kFamily, "lerp_scalar_hi", [](auto& x) { return lerp(x[0], x[1], 0.8); });
  check_parity(kFamily, "lerp_tensor", [](auto& x) { return lerp(x[0], x[1], x[2]); });
  check_parity(kFamily, "clamp_tensors", [](auto& x) { return clamp(x[0], x[1], x[2]); });
  check_parity(kFamily, "clamp_tensors_crossed", [](auto& x) { return clamp(x[0], x[1], x[2]); });
  check_parity(kFamily, "clamp_tensor_min", [](auto& x) { return clamp(x[0], x[1], Tensor()); });
  check_parity(kFamily, "clamp_tensor_max", [](auto& x) { return clamp(x[0], Tensor(), x[1]); });
}

TEST_CASE("parity: scalar-first sub div pow add mul", "[ops][parity]") {
  check_parity(kFamily, "rsub", [](auto& x) { return sub(1.0, x[0]); });
  check_parity(kFamily, "rdiv", [](auto& x) { return div(1.0, x[0]); });
  check_parity(kFamily, "rpow", [](auto& x) { return pow(2.0, x[0]); });
  check_parity(kFamily, "rpow_zero_base", [](auto& x) { return pow(0.0, x[0]); });
  check_parity(kFamily, "radd", [](auto& x) { return add(1.5, x[0]); });
  check_parity(kFamily, "rmul", [](auto& x) { return mul(-2.5, x[0]); });
}

TEST_CASE("parity: bool sums, any, all, isnan, isfinite (values and dtypes)", "[ops][parity]") {
  auto with_dtype = [](DType want, Tensor (*f)(const Tensor&)) {
    return [want, f](const std::vector<Tensor>& x) {
      Tensor y = f(x[0]);
      CHECK(y.dtype() == want);
      return y;
    };
  };
  check_parity(kFamily, "sum_bool", with_dtype(kInt64, [](const Tensor& x) { return sum(x); }));
  check_parity(kFamily, "sum_bool_dim",
               with_dtype(kInt64, [](const Tensor& x) { return sum(x, {1}); }));
  check_parity(kFamily, "any", with_dtype(kBool, [](const Tensor& x) { return any(x); }));
  check_parity(kFamily, "any_dim", with_dtype(kBool, [](const Tensor& x) { return any(x, 1); }));
  check_parity(kFamily, "all_dim", with_dtype(kBool, [](const Tensor& x) { return all(x, 1); }));
  check_parity(kFamily, "all_dim0_keep",
               with_dtype(kBool, [](const Tensor& x) { return all(x, 0, true); }));
  check_parity(kFamily, "isnan", with_dtype(kBool, [](const Tensor& x) { return isnan(x); }));
  check_parity(kFamily, "isfinite", with_dtype(kBool, [](const Tensor& x) { return isfinite(x); }));
  check_parity(kFamily, "any_float", with_dtype(kBool, [](const Tensor& x) { return any(x, 1); }));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
