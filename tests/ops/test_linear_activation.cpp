// linear_activation (linear + ReLU / GELU fused): PyTorch parity, gradcheck and gradgradcheck on
// the standard shapes, agreement with the composite twin above the parallel grain, errors.
#include <limits>

#include "nabla/ops/kernels/kernels.h"
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::check_parity;
using test::leaf;

namespace {
const std::string kFamily = "linear_activation";
constexpr LinearActivation kAll[] = {LinearActivation::ReLU, LinearActivation::GELU,
                                     LinearActivation::GELUTanh};

// Runs check(dtype, create_graph) on float32 and float64, tuned and reference kernels, with and
// without create_graph (its recorded path).
template <class Check>
void on_every_path(const Check& check) {
  for (DType dt : {kFloat32, kFloat64})
    for (bool tuned : {true, false})
      for (bool create_graph : {false, true}) {
        INFO(dtype_name(dt) << (tuned ? " tuned" : " reference")
                            << (create_graph ? " create_graph" : ""));
        kernels::TunedKernelsGuard guard(tuned);
        check(dt, create_graph);
      }
}
}  // namespace

TEST_CASE("parity: linear_activation", "[ops][parity]") {
  check_parity(kFamily, "relu_3d",
               [](auto& x) { return linear_activation(x[0], x[1], x[2], LinearActivation::ReLU); });
  check_parity(kFamily, "gelu_3d",
               [](auto& x) { return linear_activation(x[0], x[1], x[2], LinearActivation::GELU); });
  check_parity(kFamily, "gelu_tanh_2d", [](auto& x) {
    return linear_activation(x[0], x[1], x[2], LinearActivation::GELUTanh);
  });
  check_parity(kFamily, "gelu_1d_nobias", [](auto& x) {
    return linear_activation(x[0], x[1], Tensor(), LinearActivation::GELU);
  });
}

TEST_CASE("linear_activation passes gradcheck and gradgradcheck", "[ops]") {
  Tensor xt = leaf({4, 2, 3}, 1).detach().transpose(0, 2).requires_grad_();  // (3, 2, 4)
  REQUIRE(!xt.is_contiguous());
  struct Case {
    std::string name;
    std::vector<Tensor> in;
  };
  std::vector<Case> cases = {
      {"3-D x", {leaf({2, 3, 4}, 1), leaf({5, 4}, 2), leaf({5}, 3)}},
      {"transposed x", {xt, leaf({5, 4}, 2), leaf({5}, 3)}},
      {"1-D x", {leaf({4}, 1), leaf({3, 4}, 2), leaf({3}, 3)}},
      {"size-1 dims", {leaf({1, 1}, 1), leaf({1, 1}, 2), leaf({1}, 3)}},
      {"empty rows", {leaf({0, 4}, 1), leaf({3, 4}, 2), leaf({3}, 3)}},
  };
  for (LinearActivation act : kAll)
    for (auto& c : cases) {
      INFO(c.name << " activation " << static_cast<int>(act));
      auto fn = [act](const std::vector<Tensor>& x) {
        return linear_activation(x[0], x[1], x[2], act);
      };
      CHECK_GRADCHECK(fn, c.in);
      auto no_bias = [act](const std::vector<Tensor>& x) {
        return linear_activation(x[0], x[1], Tensor(), act);
      };
      CHECK_GRADCHECK(no_bias, (std::vector<Tensor>{c.in[0], c.in[1]}));
      if (act != LinearActivation::ReLU) CHECK_GRADGRADCHECK(fn, c.in);
    }
}

TEST_CASE("linear_activation equals its composite twin", "[ops]") {
  Generator g(4);
  for (DType dt : {kFloat32, kFloat64})
    for (LinearActivation act : kAll) {
      INFO(dtype_name(dt) << " activation " << static_cast<int>(act));
      // 2 * parallel_grain() / 300 rows of 300 outputs: the parallel paths run.
      Tensor x = randn({2 * parallel_grain() / 300, 40}, g, dt).requires_grad_();
      Tensor w = randn({300, 40}, g, dt).requires_grad_(), b = randn({300}, g, dt).requires_grad_();
      Tensor yf = linear_activation(x, w, b, act), yc = linear_activation_composite(x, w, b, act);
      const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
      CHECK_CLOSE(yf, yc, tol, tol);
      Tensor gout = randn(yf.shape(), g, dt);
      auto a = autograd::grad({yf}, {x, w, b}, {gout});
      auto c = autograd::grad({yc}, {x, w, b}, {gout});
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("gradient " << i);
        CHECK_CLOSE(a[i], c[i], tol * 100, tol);
      }
    }
}

TEST_CASE("linear_activation's ReLU gradient is 0 where y = 0, also for inf and NaN gradients",
          "[ops]") {
  // PyTorch's threshold_backward rule, which relu's own backward follows: the fused op used to
  // multiply by 0 (inf * 0 = NaN). Tuned and reference kernels, and create_graph's recorded path.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  on_every_path([&](DType dt, bool create_graph) {
    // x @ w^T + b = (-1, 2, -3, 4, 0): three outputs at y = 0, two kept.
    Tensor x = from_vector<double>({1.0}, {1, 1}).to(dt).requires_grad_();
    Tensor w = from_vector<double>({-1.0, 2.0, -3.0, 4.0, 1.0}, {5, 1}).to(dt);
    Tensor b = from_vector<double>({0, 0, 0, 0, -1}, {5}).to(dt);
    Tensor y = linear_activation(x, w, b, LinearActivation::ReLU);
    Tensor g = from_vector<double>({inf, 5.0, nan, -inf, nan}, {1, 5}).to(dt);
    Tensor gx = autograd::grad({y}, {x}, {g}, /*retain_graph=*/false, create_graph)[0];
    Tensor ref = autograd::grad({relu(linear(x, w, b))}, {x}, {g})[0];
    // d/dx = 5 * 2 + (-inf) * 4 = -inf: every masked term is 0, not NaN.
    CHECK(std::isinf(gx.item<double>()));
    CHECK(gx.item<double>() < 0);
    CHECK(ref.item<double>() == gx.item<double>());
  });
}

TEST_CASE("linear_activation's ReLU keeps a NaN and passes its gradient, as relu(linear())",
          "[ops]") {
  // PyTorch: relu(NaN) = NaN and threshold_backward passes the gradient where y is NaN.
  const double nan = std::nan("");
  on_every_path([&](DType dt, bool create_graph) {
    Tensor x = from_vector<double>({nan, 1.0}, {2, 1}).to(dt).requires_grad_();
    Tensor w = from_vector<double>({2.0, -1.0}, {2, 1}).to(dt).requires_grad_();
    Tensor y = linear_activation(x, w, Tensor(), LinearActivation::ReLU);
    const std::vector<double> yv = y.to(kFloat64).to_vector<double>();
    CHECK(std::isnan(yv[0]));  // row 0: NaN * w
    CHECK(std::isnan(yv[1]));
    CHECK(yv[2] == 2.0);  // row 1: (2, -1) -> (2, 0)
    CHECK(yv[3] == 0.0);
    Tensor g = from_vector<double>({1.0, 1.0, 1.0, 1.0}, {2, 2}).to(dt);
    auto grads = autograd::grad({y}, {w}, {g}, false, create_graph);
    // dW = grad_z^T x: row 0's gradient passes (1, 1), so its NaN x reaches both weights.
    const std::vector<double> gw = grads[0].to(kFloat64).to_vector<double>();
    CHECK(std::isnan(gw[0]));
    CHECK(std::isnan(gw[1]));
  });
}

TEST_CASE("linear_activation rejects bad input naming itself", "[ops]") {
  CHECK_THROWS_WITH(
      linear_activation(zeros({2, 3}), zeros({4, 5}), Tensor(), LinearActivation::ReLU),
      Contains("linear_activation") && Contains("(4, 5)"));
  CHECK_THROWS_WITH(
      linear_activation(zeros({2, 3}), zeros({4, 3}, kFloat64), Tensor(), LinearActivation::GELU),
      Contains("linear_activation") && Contains("float64"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
