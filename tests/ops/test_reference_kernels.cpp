// gelu, dropout, linear and linear_activation: each tuned kernel (ops/kernels/) against the
// reference kernel in its op file, forward and backward, float32 and float64, contiguous and
// strided inputs, sizes 0 and 1 and sizes split across threads. Bitwise where both compute the
// same formula in the same order; otherwise within the bound stated at each check.
#include <cmath>
#include <limits>

#include "tests/ops/kernel_compare.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::compare_kernels;
using test::KernelComparison;

namespace {

// Inputs of `shape` (values in about [-6, 6]) as given, transposed (dims reversed: a strided view
// of a contiguous tensor) and as a view with a step of 2 along the last dim.
std::vector<std::pair<const char*, Tensor>> layouts(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  Shape reversed(shape.rbegin(), shape.rend()), doubled = shape;
  if (!doubled.empty()) doubled.back() *= 2;
  std::vector<int64_t> order;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) order.push_back(d);
  Tensor stepped = mul(randn(doubled, g, dt), 2.0);
  if (!shape.empty()) stepped = stepped.slice(-1, 0, doubled.back(), 2);
  return {{"contiguous", mul(randn(shape, g, dt), 2.0).requires_grad_()},
          {"transposed", mul(randn(reversed, g, dt), 2.0).permute(order).requires_grad_()},
          {"step 2", stepped.requires_grad_()}};
}

const std::vector<Shape> kShapes = {{0}, {1}, {3, 0}, {1, 1}, {7, 5}, {2, 3, 4}, {300, 700}};

double unit_roundoff(DType dt) { return dt == kFloat32 ? 0x1.0p-24 : 0x1.0p-53; }

Tensor abs64(const Tensor& t) { return abs(t.detach().to(kFloat64)); }

// |x| |w|^T + |b|: what bounds the rounding error of x w^T + b.
Tensor magnitude(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor m = matmul(abs64(x), abs64(w).t());
  return b.defined() ? add(m, abs64(b)) : m;
}

}  // namespace

TEST_CASE("gelu: tuned kernels against the reference", "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64})
    for (GeluApproximate a : {GeluApproximate::None, GeluApproximate::Tanh})
      for (const Shape& shape : kShapes)
        for (auto& [layout, x] : layouts(shape, dt, 3)) {
          INFO(dtype_name(dt) << (a == GeluApproximate::None ? " exact " : " tanh ")
                              << shape_str(shape) << " " << layout);
          const KernelComparison c =
              compare_kernels([a](const auto& in) { return gelu(in[0], a); }, {x});
          if (dt == kFloat64 || a == GeluApproximate::Tanh) {
            // The same libm calls (std::erf, std::exp, std::tanh) in the same order.
            test::check_bitwise(c);
          } else {
            // float32 exact: vec_math::erf is within 5e-7 of erf, so gelu = x (1 + erf) / 2 moves
            // by at most 2.5e-7 |x| plus a few roundings: bound 4e-7 |x|. gelu' = Phi + x phi
            // moves by 2.5e-7 plus the rounding of its two terms (each < 1.2): bound 6e-7, so
            // the gradient upstream * gelu' within 6e-7 |upstream|.
            test::check_within(c.tuned, c.reference, mul(abs(x.detach().to(kFloat64)), 4e-7));
            test::check_within(c.tuned_grads[0], c.reference_grads[0],
                               mul(abs64(test::upstream_grad(x.shape(), dt)), 6e-7));
          }
        }
}

TEST_CASE("gelu_backward: tuned and reference kernels broadcast alike", "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64}) {
    Generator g(4);
    Tensor grad = randn({3, 1, 5}, g, dt), x = randn({4, 5}, g, dt);
    Tensor tuned, reference;
    {
      kernels::TunedKernelsGuard on(true);
      tuned = gelu_backward(grad, x, GeluApproximate::Tanh);
    }
    {
      kernels::TunedKernelsGuard off(false);
      reference = gelu_backward(grad, x, GeluApproximate::Tanh);
      CHECK_THROWS_AS(gelu_backward(grad, x.to(dt == kFloat32 ? kFloat64 : kFloat32)), DTypeError);
      CHECK_THROWS_AS(gelu_backward(grad, randn({4, 4}, g, dt)), ShapeError);
    }
    CHECK(tuned.shape() == Shape{3, 4, 5});
    CHECK_BITWISE(tuned, reference);
  }
}

TEST_CASE("dropout: tuned and reference kernels draw the same mask, bitwise", "[ops][kernels]") {
  const uint64_t kTwo32 = uint64_t{1} << 32;
  for (DType dt : {kFloat32, kFloat64})
    for (double p : {0.3, 1.0})
      for (const Shape& shape : kShapes)
        for (auto& [layout, x] : layouts(shape, dt, 5))
          for (uint64_t offset : {uint64_t{0}, kTwo32 - 3}) {
            INFO(dtype_name(dt) << " p " << p << " " << shape_str(shape) << " " << layout
                                << " offset " << offset);
            auto fn = [p, offset](const std::vector<Tensor>& in) {
              Generator gen(0xABCDEF12345ULL);
              gen.set_state(gen.seed(), offset);
              return dropout(in[0], p, true, gen);
            };
            test::check_bitwise(compare_kernels(fn, {x}));
          }
}

TEST_CASE("linear: tuned GEMM against the reference loops", "[ops][kernels]") {
  // (M, in, out): empty, single-element, odd, and big enough for blas to split across threads.
  const std::vector<std::array<int64_t, 3>> sizes = {
      {0, 4, 3}, {3, 0, 2}, {2, 3, 0}, {1, 1, 1}, {7, 5, 3}, {300, 33, 260}, {1, 64, 130}};
  for (DType dt : {kFloat32, kFloat64})
    for (auto [M, in, out] : sizes)
      for (bool with_bias : {true, false})
        for (bool strided : {false, true}) {
          INFO(dtype_name(dt) << " M " << M << " in " << in << " out " << out << " bias "
                              << with_bias << " strided " << strided);
          Generator g(7);
          // Strided: x is the transpose of an (in, M) tensor, W a column slice of a wider one.
          Tensor x = strided ? randn({in, M}, g, dt).t() : randn({M, in}, g, dt);
          Tensor w =
              strided ? randn({out, 2 * in + 1}, g, dt).narrow(1, 1, in) : randn({out, in}, g, dt);
          Tensor b = with_bias ? randn({out}, g, dt) : Tensor();
          for (Tensor* t : {&x, &w, &b})
            if (t->defined()) t->requires_grad_();
          std::vector<Tensor> inputs = {x, w};
          if (with_bias) inputs.push_back(b);
          const KernelComparison c = compare_kernels(
              [](const auto& v) { return linear(v[0], v[1], v.size() > 2 ? v[2] : Tensor()); },
              inputs);
          // Each output is a dot product of length `in` plus the bias: BLAS rounds it within
          // (in + 1) u (sum |x_k w_k| + |b|) (Higham, Accuracy and Stability of Numerical
          // Algorithms, sec. 3.1); the reference sums in double and rounds once, u |y|.
          test::check_within(
              c.tuned, c.reference,
              mul(magnitude(x, w, b), static_cast<double>(in + 2) * unit_roundoff(dt)));
          // The backward is matmul and sum in both modes.
          for (size_t i = 0; i < c.tuned_grads.size(); ++i) {
            INFO("gradient " << i);
            CHECK_BITWISE(c.tuned_grads[i], c.reference_grads[i]);
          }
        }
}

TEST_CASE("linear_activation: tuned kernels against the reference", "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64})
    for (LinearActivation act :
         {LinearActivation::ReLU, LinearActivation::GELU, LinearActivation::GELUTanh})
      for (auto [M, in, out] : std::vector<std::array<int64_t, 3>>{
               {0, 3, 2}, {1, 1, 1}, {5, 0, 3}, {6, 4, 5}, {2, 3, 300}, {700, 8, 300}})
        for (bool strided : {false, true}) {
          INFO(dtype_name(dt) << " act " << static_cast<int>(act) << " M " << M << " in " << in
                              << " out " << out << " strided " << strided);
          Generator g(8);
          Tensor x = (strided ? randn({in, M}, g, dt).t() : randn({M, in}, g, dt)).requires_grad_();
          Tensor w = randn({out, in}, g, dt).requires_grad_();
          Tensor b = randn({out}, g, dt).requires_grad_();
          auto fn = [act](const std::vector<Tensor>& v) {
            return linear_activation(v[0], v[1], v[2], act);
          };
          const KernelComparison c = compare_kernels(fn, {x, w, b});
          // Forward: linear's bound through an activation of slope <= 1.13, plus, for float32
          // exact GELU, vec_math::erf's 4e-7 |z| (see the gelu test).
          const bool erf_differs = dt == kFloat32 && act == LinearActivation::GELU;
          const double per_magnitude =
              1.13 * static_cast<double>(in + 4) * unit_roundoff(dt) + (erf_differs ? 4e-7 : 0.0);
          test::check_within(c.tuned, c.reference, mul(magnitude(x, w, b), per_magnitude));
          // Backward on one graph: grad_z = g act'(saved) and the bias gradient's column sums in
          // row order are the same arithmetic, bit for bit, except float32 exact GELU's erf: its
          // act' within 6e-7, so grad_z within 6e-7 |g|, and the products with W and x within
          // that times |W| and |x| (plus both products' rounding, 2 (K + 2) u).
          if (!erf_differs) {
            for (size_t i = 0; i < 3; ++i) {
              INFO("gradient " << i);
              CHECK_BITWISE(c.tuned_grads[i], c.reference_grads[i]);
            }
            continue;
          }
          Tensor up = abs64(test::upstream_grad({M, out}, dt));  // |grad_z| <= 1.13 |up|
          auto per = [](int64_t K) {
            return 1.13 * (6e-7 + 2.0 * static_cast<double>(K + 2) * 0x1.0p-24);
          };
          test::check_within(c.tuned_grads[0], c.reference_grads[0],
                             mul(matmul(up, abs64(w)), per(out)));
          test::check_within(c.tuned_grads[1], c.reference_grads[1],
                             mul(matmul(up.t(), abs64(x)), per(M)));
          test::check_within(c.tuned_grads[2], c.reference_grads[2], mul(sum(up, {0}), per(M)));
        }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
