// layer_norm: gradcheck and gradgradcheck (x, weight, bias) on the standard shapes, agreement of
// the fused kernels with the composite twin, float32 precision at a large mean, and errors.
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

struct LnCase {
  Tensor x;
  Shape ns;
};

std::vector<LnCase> ln_cases() {
  Tensor xt = leaf({4, 3}, 5).detach().t().requires_grad_();  // (3, 4), non-contiguous
  return {{leaf({5}, 1), {5}},
          {leaf({1, 3}, 2), {3}},
          {leaf({2, 3, 4}, 3), {4}},
          {leaf({2, 3, 4}, 4), {3, 4}},
          {xt, {4}},
          {leaf({2, 1, 3, 2}, 6), {3, 2}},
          {leaf({0, 3}, 7), {3}},
          {leaf({3, 1}, 8), {1}}};
}

// Forward within 1e-6 and gradients within 1e-5 for the same random upstream gradient.
void check_agree(const DifferentiableFn& fused, const DifferentiableFn& composite,
                 const std::vector<Tensor>& in, uint64_t seed) {
  Tensor yf = fused(in), yc = composite(in);
  CHECK_CLOSE(yf, yc, 1e-6, 0.0);
  Generator g(seed);
  Tensor gout = randn(yf.shape(), g, yf.dtype());
  auto gf = autograd::grad({yf}, in, {gout}, false, false, true);
  auto gc = autograd::grad({yc}, in, {gout}, false, false, true);
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("gradient " << i);
    CHECK_CLOSE(gf[i], gc[i], 1e-5, 0.0);
  }
}

}  // namespace

TEST_CASE("layer_norm passes gradcheck and gradgradcheck", "[ops]") {
  for (auto& c : ln_cases()) {
    INFO("x " << shape_str(c.x.shape()) << " normalized_shape " << shape_str(c.ns));
    Shape ns = c.ns;
    Tensor w = leaf(ns, 20), b = leaf(ns, 21);
    auto affine = [ns](auto& in) { return layer_norm(in[0], ns, in[1], in[2], 1e-3); };
    auto plain = [ns](auto& in) { return layer_norm(in[0], ns); };
    auto composite = [ns](auto& in) { return layer_norm_composite(in[0], ns, in[1], in[2], 1e-3); };
    CHECK_GRADCHECK(affine, (std::vector<Tensor>{c.x, w, b}));
    CHECK_GRADGRADCHECK(affine, (std::vector<Tensor>{c.x, w, b}));
    CHECK_GRADCHECK(plain, std::vector<Tensor>{c.x});
    CHECK_GRADGRADCHECK(composite, (std::vector<Tensor>{c.x, w, b}));
    // Only the weight needs grad: x's gradient is skipped.
    Tensor xd = c.x.detach();
    auto w_only = [ns, xd](auto& in) { return layer_norm(xd, ns, in[0]); };
    CHECK_GRADCHECK(w_only, std::vector<Tensor>{w});
  }
}

TEST_CASE("fused layer_norm agrees with its composite twin", "[ops]") {
  Generator g(5);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t a = 1 + trial % 3, b = 2 + trial % 4, c = 1 + trial % 5;
    Shape ns = trial % 2 == 0 ? Shape{c} : Shape{b, c};
    INFO("x (" << a << ", " << b << ", " << c << ") normalized_shape " << shape_str(ns));
    Tensor x = add(mul(randn({a, b, c}, g, kFloat64), 3.0), 2.0).requires_grad_();
    Tensor w = randn(ns, g, kFloat64).requires_grad_(),
           bias = randn(ns, g, kFloat64).requires_grad_();
    check_agree([ns](auto& in) { return layer_norm(in[0], ns, in[1], in[2]); },
                [ns](auto& in) { return layer_norm_composite(in[0], ns, in[1], in[2]); },
                {x, w, bias}, 10 + trial);
  }
}

TEST_CASE("layer_norm in float32 is accurate at mean 1e4 and std 1e-2", "[ops]") {
  Generator g(9);
  // The float32 input, and the same values in float64.
  Tensor x32 = add(mul(randn({4, 64}, g, kFloat32), 1e-2), 1e4);
  Tensor x64 = x32.to(kFloat64);
  Tensor w = randn({64}, g, kFloat64), b = randn({64}, g, kFloat64);
  Tensor gout = randn({4, 64}, g, kFloat64);
  auto run = [&](const Tensor& x, DType dt) {
    Tensor xi = x.detach().requires_grad_(), wi = w.to(dt).requires_grad_(),
           bi = b.to(dt).requires_grad_();
    Tensor y = layer_norm(xi, {64}, wi, bi);
    auto grads = autograd::grad({y}, {xi, wi, bi}, {gout.to(dt)});
    return std::vector<Tensor>{y, grads[0], grads[1], grads[2]};
  };
  auto r32 = run(x32, kFloat32), r64 = run(x64, kFloat64);
  for (size_t i = 0; i < r32.size(); ++i) {
    INFO("output " << i << " (y, grad_x, grad_w, grad_b)");
    // Relative to the largest magnitude: 1e-4.
    auto v64 = r64[i].to_vector<double>();
    double scale = 0;
    for (double v : v64) scale = std::max(scale, std::abs(v));
    CHECK_CLOSE(r32[i], r64[i], 1e-4 * scale, 0.0);
  }
  // The statistics are right, not just self-consistent: without eps (which is 10% of the
  // variance 1e-4 here) and the affine part, rows have mean 0 and variance 1.
  Tensor y = layer_norm(x32, {64}, Tensor(), Tensor(), 0.0);
  CHECK_CLOSE(mean(y, {-1}), zeros({4}), 1e-5, 0);
  CHECK_CLOSE(mean(mul(y, y), {-1}), ones({4}), 1e-3, 0);
}

TEST_CASE("layer_norm values and errors", "[ops]") {
  Tensor x = tensor({{1, 2, 3}, {2, 2, 2}}, kFloat64);
  Tensor y = layer_norm(x, {3}, Tensor(), Tensor(), 0.0);
  const double s = std::sqrt(1.5);
  CHECK_CLOSE(y, tensor({{-s, 0, s}, {0, 0, 0}}, kFloat64), 1e-12, 0);
  Tensor ya = layer_norm(x, {3}, tensor({1, 2, 3}, kFloat64), tensor({1, 1, 1}, kFloat64), 0.0);
  CHECK_CLOSE(ya, tensor({{1 - s, 1, 1 + 3 * s}, {1, 1, 1}}, kFloat64), 1e-12, 0);

  Tensor z = zeros({2, 3});
  CHECK_THROWS_AS(layer_norm(z, {4}), ShapeError);
  CHECK_THROWS_WITH(layer_norm(z, {4}),
                    Contains("layer_norm") && Contains("(4,)") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(layer_norm(z, {2, 2, 3}), Contains("(2, 2, 3)") && Contains("(2, 3)"));
  CHECK_THROWS_AS(layer_norm(z, {}), ShapeError);
  CHECK_THROWS_WITH(layer_norm(z, {3}, zeros({2})),
                    Contains("layer_norm") && Contains("weight") && Contains("(2,)"));
  CHECK_THROWS_WITH(layer_norm(z, {3}, Tensor(), zeros({3, 1})),
                    Contains("bias") && Contains("(3, 1)"));
  CHECK_THROWS_AS(layer_norm(z, {3}, zeros({3}, kFloat64)), DTypeError);
  CHECK_THROWS_AS(layer_norm(arange(3), {3}), DTypeError);
  CHECK_THROWS_AS(layer_norm(z, {3}, Tensor(), Tensor(), -1.0), ValueError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
