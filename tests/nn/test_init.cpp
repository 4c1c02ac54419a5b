// nn::init: gains and fans as PyTorch, and the statistics of every scheme on fixed seeds
// (bounds, means and variances on 60k-element tensors; tolerances are many standard errors).
#include <cmath>
#include <numbers>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::nn::init;
using Catch::Matchers::Contains;

namespace {

struct Stats {
  double min, max, mean, var;
};

Stats stats(const Tensor& t) {
  auto v = t.to(kFloat64).to_vector<double>();
  Stats s{INFINITY, -INFINITY, 0, 0};
  for (double x : v) {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    s.mean += x;
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= static_cast<double>(v.size() - 1);
  return s;
}

// Exact for every floating dtype (each converts to double without rounding).
std::vector<double> as_doubles(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); }
double Phi(double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; }

}  // namespace

TEST_CASE("init: calculate_gain and fans as PyTorch", "[nn]") {
  CHECK(calculate_gain(Nonlinearity::Linear) == 1.0);
  CHECK(calculate_gain(Nonlinearity::Sigmoid) == 1.0);
  CHECK(calculate_gain(Nonlinearity::Tanh) == Approx(5.0 / 3));
  CHECK(calculate_gain(Nonlinearity::ReLU) == Approx(std::sqrt(2.0)));
  CHECK(calculate_gain(Nonlinearity::LeakyReLU) == Approx(std::sqrt(2.0 / (1 + 0.01 * 0.01))));
  CHECK(calculate_gain(Nonlinearity::LeakyReLU, std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3)));
  CHECK(calculate_gain(Nonlinearity::SELU) == 0.75);

  Fans f = calculate_fan_in_and_fan_out(zeros({8, 3}));
  CHECK(f.fan_in == 3);
  CHECK(f.fan_out == 8);
  f = calculate_fan_in_and_fan_out(zeros({16, 4, 3, 5}));  // conv weight (out, in, kh, kw)
  CHECK(f.fan_in == 4 * 15);
  CHECK(f.fan_out == 16 * 15);
  CHECK_THROWS_AS(calculate_fan_in_and_fan_out(zeros({5})), ShapeError);
  CHECK_THROWS_WITH(xavier_uniform_(zeros({5})), Contains("xavier_uniform_") && Contains("(5,)"));
}

TEST_CASE("init: uniform_ and normal_ statistics", "[nn]") {
  Generator gen(7);
  Stats u = stats(uniform_(empty({200, 300}), -1.0, 3.0, gen));
  CHECK(u.min >= -1.0);
  CHECK(u.max < 3.0);
  CHECK(u.mean == Approx(1.0).margin(0.02));
  CHECK(u.var == Approx(16.0 / 12).epsilon(0.03));

  Stats n = stats(normal_(empty({200, 300}, kFloat64), 2.0, 0.5, gen));
  CHECK(n.mean == Approx(2.0).margin(0.01));
  CHECK(n.var == Approx(0.25).epsilon(0.03));
  CHECK_THROWS_AS(uniform_(empty({2}), 1.0, 0.0), ValueError);
  CHECK_THROWS_AS(normal_(empty({2}), 0.0, -1.0), ValueError);
  CHECK_THROWS_WITH(uniform_(zeros({2}, kInt64)), Contains("uniform_") && Contains("int64"));
}

TEST_CASE("init: the generator makes draws reproducible", "[nn]") {
  Generator g1(11), g2(11);
  Tensor a = normal_(empty({4, 5}), 0, 1, g1), b = normal_(empty({4, 5}), 0, 1, g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  Tensor c = normal_(empty({4, 5}), 0, 1, g1);  // the stream moved on
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  manual_seed(5);
  Tensor d = uniform_(empty({6}));
  manual_seed(5);
  Tensor e = uniform_(empty({6}));
  CHECK(d.to_vector<float>() == e.to_vector<float>());
}

TEST_CASE("init: values are a float64 draw mapped and stored in the tensor's dtype", "[nn]") {
  // What fill_random writes directly (float32, float64, contiguous) must be what drawing a
  // float64 tensor, mapping it and copying it gives, and leave the generator at the same counter.
  for (DType dt : {kFloat32, kFloat64, kBFloat16})
    for (bool contiguous : {true, false}) {
      INFO(dtype_name(dt) << (contiguous ? " contiguous" : " transposed"));
      Generator g1(21), g2(21);
      Tensor t = contiguous ? empty({70, 30}, dt) : empty({30, 70}, dt).t();
      normal_(t, 0.5, 2.0, g1);
      Tensor want = add(mul(randn({70, 30}, g2, kFloat64), 2.0), 0.5).to(dt);
      CHECK(as_doubles(t) == as_doubles(want));
      Tensor u = contiguous ? empty({70, 30}, dt) : empty({30, 70}, dt).t();
      uniform_(u, -3.0, 1.0, g1);
      want = add(mul(rand({70, 30}, g2, kFloat64), 4.0), -3.0).to(dt);
      CHECK(as_doubles(u) == as_doubles(want));
      CHECK(rand({3}, g1).to_vector<float>() == rand({3}, g2).to_vector<float>());
    }
}

TEST_CASE("init: xavier and kaiming bounds and variances", "[nn]") {
  Generator gen(1);
  const double fan_in = 300, fan_out = 200;
  SECTION("xavier_uniform_") {
    Stats s = stats(xavier_uniform_(empty({200, 300}), 2.0, gen));
    const double bound = 2.0 * std::sqrt(6.0 / (fan_in + fan_out));
    CHECK(s.min >= -bound);
    CHECK(s.max <= bound);
    CHECK(s.max > 0.99 * bound);
    CHECK(s.var == Approx(bound * bound / 3).epsilon(0.03));
  }
  SECTION("xavier_normal_") {
    Stats s = stats(xavier_normal_(empty({200, 300}), 1.0, gen));
    CHECK(s.var == Approx(2.0 / (fan_in + fan_out)).epsilon(0.03));
    CHECK(s.mean == Approx(0).margin(0.002));
  }
  SECTION("kaiming_uniform_ (relu, fan_in)") {
    Stats s =
        stats(kaiming_uniform_(empty({200, 300}), 0, FanMode::FanIn, Nonlinearity::ReLU, gen));
    const double bound = std::sqrt(2.0) * std::sqrt(3.0 / fan_in);
    CHECK(s.min >= -bound);
    CHECK(s.max <= bound);
    CHECK(s.var == Approx(2.0 / fan_in).epsilon(0.03));
  }
  SECTION("kaiming_uniform_ with a = sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in))") {
    Stats s = stats(kaiming_uniform_(empty({200, 300}), std::sqrt(5.0), FanMode::FanIn,
                                     Nonlinearity::LeakyReLU, gen));
    CHECK(s.max <= 1 / std::sqrt(fan_in));
    CHECK(s.max > 0.99 / std::sqrt(fan_in));
    CHECK(s.var == Approx(1.0 / (3 * fan_in)).epsilon(0.03));
  }
  SECTION("kaiming_normal_ (fan_out, leaky_relu a = 0.2)") {
    Stats s = stats(kaiming_normal_(empty({200, 300}, kFloat64), 0.2, FanMode::FanOut,
                                    Nonlinearity::LeakyReLU, gen));
    CHECK(s.var == Approx(2.0 / (1 + 0.04) / fan_out).epsilon(0.03));
  }
  SECTION("zero-element tensors are left alone") {
    CHECK(kaiming_uniform_(empty({0, 3}), 0, FanMode::FanIn, Nonlinearity::ReLU, gen).numel() == 0);
  }
}

TEST_CASE("init: trunc_normal_ bounds and moments, also far in the tail", "[nn]") {
  Generator gen(3);
  SECTION("[-2, 2]") {
    Stats s = stats(trunc_normal_(empty({200, 300}, kFloat64), 0, 1, -2, 2, gen));
    const double z = Phi(2) - Phi(-2);
    const double var = 1 + (-2 * phi(-2) - 2 * phi(2)) / z;  // symmetric: mean 0
    CHECK(s.min >= -2);
    CHECK(s.max <= 2);
    CHECK(s.max > 1.99);
    CHECK(s.mean == Approx(0).margin(0.01));
    CHECK(s.var == Approx(var).epsilon(0.03));
  }
  SECTION("ViT-style std 0.02, shifted mean") {
    Stats s = stats(trunc_normal_(empty({200, 300}), 0.5, 0.02, -2, 2, gen));
    CHECK(s.mean == Approx(0.5).margin(0.001));
    CHECK(s.var == Approx(0.0004).epsilon(0.03));
  }
  SECTION("[3, 4]: a tail interval rejection sampling would struggle with") {
    Stats s = stats(trunc_normal_(empty({200, 300}, kFloat64), 0, 1, 3, 4, gen));
    const double z = Phi(4) - Phi(3);
    const double mean = (phi(3) - phi(4)) / z;
    const double var = 1 + (3 * phi(3) - 4 * phi(4)) / z - mean * mean;
    CHECK(s.min >= 3);
    CHECK(s.max <= 4);
    CHECK(s.mean == Approx(mean).epsilon(0.01));
    CHECK(s.var == Approx(var).epsilon(0.05));
  }
  CHECK_THROWS_AS(trunc_normal_(empty({2}), 0, 1, 2, -2), ValueError);
}

TEST_CASE("init: constants, in place on parameters that require grad", "[nn]") {
  Tensor p = zeros({2, 3}).requires_grad_();
  Tensor same = constant_(p, 2.5);
  CHECK(same.same(p));
  CHECK(p.to_vector<float>() == std::vector<float>(6, 2.5f));
  ones_(p);
  CHECK(p.to_vector<float>() == std::vector<float>(6, 1.0f));
  zeros_(p);
  CHECK(p.to_vector<float>() == std::vector<float>(6, 0.0f));
  // A non-contiguous view is filled through its strides.
  Tensor base = zeros({3, 4});
  uniform_(base.t(), 1.0, 2.0);
  Stats s = stats(base);
  CHECK(s.min >= 1.0);
  CHECK(p.requires_grad());
  CHECK(p.is_leaf());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
