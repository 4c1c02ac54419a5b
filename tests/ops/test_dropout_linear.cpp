// dropout (reproducible masks, identity cases, statistics, gradient) and linear (gradcheck on
// 1-D/2-D/3-D inputs, values against matmul, errors).
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

TEST_CASE("dropout: the same seed gives the same mask, consecutive calls differ", "[ops]") {
  Tensor x = ones({1000});
  Generator g1(42), g2(42);
  Tensor a = dropout(x, 0.5, true, g1), b = dropout(x, 0.5, true, g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(g1.offset() == 250);  // one Philox block (four 32-bit words) per 4 elements
  Tensor c = dropout(x, 0.5, true, g1);
  CHECK(c.to_vector<float>() != a.to_vector<float>());
  Tensor odd = dropout(ones({1003}), 0.25, true, g1);  // a size that is not a multiple of 4
  const double kept = sum(ne(odd, 0.0).to(kFloat32)).item();
  CHECK(kept > 1003 * 0.75 - 60);
  CHECK(kept < 1003 * 0.75 + 60);
  // Values are 0 or 1 / (1 - p).
  for (float v : a.to_vector<float>()) CHECK((v == 0.0f || v == 2.0f));
  // The default generator overload draws from default_generator().
  manual_seed(7);
  Tensor d = dropout(x, 0.5);
  Generator g7(7);
  CHECK(d.to_vector<float>() == dropout(x, 0.5, true, g7).to_vector<float>());
}

TEST_CASE("dropout: element i keeps iff word i % 4 of block first + i / 4 is >= ceil(p 2^32)",
          "[ops]") {
  // The mask is a function of (seed, counter) only: checked against Generator::block for sizes
  // that split across threads and end mid-block, with counters crossing 2^32, in both dtypes.
  const uint64_t kTwo32 = uint64_t{1} << 32;
  for (DType dt : {kFloat32, kFloat64}) {
    for (int64_t n : {1, 5, 1003, 100003}) {
      for (uint64_t offset : {uint64_t{0}, kTwo32 - 1000, 7 * kTwo32 - 3}) {
        INFO(dtype_name(dt) << " n " << n << " offset " << offset);
        const double p = 0.3;
        Generator gen(0x1234567890ULL);
        gen.set_state(gen.seed(), offset);
        Tensor y = dropout(ones({n}, dt), p, true, gen);
        CHECK(gen.offset() == offset + static_cast<uint64_t>((n + 3) / 4));
        const auto threshold = static_cast<uint64_t>(std::ceil(p * 0x1.0p32));
        const std::vector<double> values = y.to(kFloat64).to_vector<double>();
        const double scale = dt == kFloat32
                                 ? static_cast<double>(static_cast<float>(1.0 / (1.0 - p)))
                                 : 1.0 / (1.0 - p);
        int64_t mismatches = 0;
        for (int64_t i = 0; i < n; ++i) {
          const auto word = gen.block(offset + static_cast<uint64_t>(i / 4))[i % 4];
          const double v = values[static_cast<size_t>(i)];
          const bool kept = v != 0.0;
          mismatches += kept != (word >= threshold);
          if (kept) mismatches += v != scale;
        }
        CHECK(mismatches == 0);
      }
    }
  }
}

TEST_CASE("dropout: identity, p = 1 and errors", "[ops]") {
  Tensor x = leaf({3, 4}, 1);
  Generator g(1);
  CHECK(dropout(x, 0.0, true, g).same(x));
  CHECK(dropout(x, 0.7, false, g).same(x));
  CHECK(g.offset() == 0);
  Tensor z = dropout(x, 1.0, true, g);
  CHECK(z.to_vector<double>() == std::vector<double>(12, 0.0));
  sum(z).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(12, 0.0));
  CHECK_THROWS_AS(dropout(x, -0.1, true, g), ValueError);
  CHECK_THROWS_WITH(dropout(x, 1.5, true, g), Contains("dropout") && Contains("1.5"));
  CHECK_THROWS_AS(dropout(x, std::nan(""), true, g), ValueError);
  CHECK_THROWS_AS(dropout(x, 1.5, false, g), ValueError);  // checked even when not training
  CHECK_THROWS_AS(dropout(arange(3), 0.5, true, g), DTypeError);
}

TEST_CASE("dropout preserves the mean and drops a fraction p", "[ops]") {
  Generator g(123);
  const double p = 0.3;
  Tensor x = ones({200000}, kFloat64);
  Tensor y = dropout(x, p, true, g);
  // Accumulated here rather than with mean(): a plain loop is the independent check.
  double total = 0, dropped = 0;
  for (double v : y.to_vector<double>()) {
    total += v;
    dropped += v == 0.0;
  }
  CHECK(total / 200000 == Approx(1.0).margin(0.01));
  CHECK(dropped / 200000 == Approx(p).margin(0.005));
}

TEST_CASE("dropout gradient is grad * mask / (1 - p)", "[ops]") {
  Tensor x = leaf({2, 3, 4}, 2);
  Generator g(5);
  Tensor y = dropout(x, 0.25, true, g);
  Generator gg(6);
  Tensor gout = randn({2, 3, 4}, gg, kFloat64);
  auto grads = autograd::grad({y}, {x}, {gout});
  Tensor keep = ne(y, 0.0).to(kFloat64);
  CHECK_CLOSE(grads[0], mul(mul(gout, keep), 1.0 / 0.75), 1e-15, 0);
  CHECK_CLOSE(y, mul(mul(x, keep), 1.0 / 0.75), 1e-15, 0);
  // gradcheck with a fresh generator per call, so every evaluation draws the same mask.
  Tensor xt = leaf({4, 3}, 3).detach().t().requires_grad_();
  for (Tensor in : {x, xt, leaf({}, 4), leaf({0, 3}, 5)}) {
    INFO("shape " << shape_str(in.shape()));
    auto fn = [](const std::vector<Tensor>& v) {
      Generator local(9);
      return dropout(v[0], 0.4, true, local);
    };
    CHECK_GRADCHECK(fn, std::vector<Tensor>{in});
    CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{in});
  }
}

TEST_CASE("linear passes gradcheck and gradgradcheck", "[ops]") {
  Tensor xt = leaf({4, 3}, 1).detach().t().requires_grad_();  // (3, 4), non-contiguous
  Tensor x3t = leaf({2, 4, 3}, 2).detach().transpose(1, 2).requires_grad_();  // not viewable
  for (Tensor x : {leaf({4}, 3), leaf({1, 4}, 4), leaf({3, 4}, 5), xt, leaf({2, 3, 4}, 6), x3t,
                   leaf({0, 4}, 7), leaf({2, 1, 2, 4}, 8)}) {
    INFO("x " << shape_str(x.shape()));
    Tensor w = leaf({5, 4}, 9), b = leaf({5}, 10);
    auto with_bias = [](auto& in) { return linear(in[0], in[1], in[2]); };
    auto no_bias = [](auto& in) { return linear(in[0], in[1]); };
    CHECK_GRADCHECK(with_bias, (std::vector<Tensor>{x, w, b}));
    CHECK_GRADGRADCHECK(with_bias, (std::vector<Tensor>{x, w, b}));
    CHECK_GRADCHECK(no_bias, (std::vector<Tensor>{x, w}));
  }
  // A transposed weight (e.g. tied embeddings) and an input that does not need grad.
  Tensor wt = leaf({4, 5}, 11).detach().t().requires_grad_();
  Tensor xd = leaf({2, 4}, 12).detach();
  auto fn = [xd](auto& in) { return linear(xd, in[0], in[1]); };
  CHECK_GRADCHECK(fn, (std::vector<Tensor>{wt, leaf({5}, 13)}));
}

TEST_CASE("linear values and errors", "[ops]") {
  Generator g(3);
  Tensor x = randn({2, 3, 4}, g, kFloat64), w = randn({5, 4}, g, kFloat64),
         b = randn({5}, g, kFloat64);
  Tensor y = linear(x, w, b);
  CHECK(y.shape() == Shape{2, 3, 5});
  CHECK_CLOSE(y, add(matmul(x, w.t()), b), 1e-13, 0);
  CHECK(linear(randn({4}, g, kFloat64), w).shape() == Shape{5});
  CHECK_THROWS_AS(linear(zeros({2, 3}), zeros({5, 4})), ShapeError);
  CHECK_THROWS_WITH(linear(zeros({2, 3}), zeros({5, 4})),
                    Contains("linear") && Contains("(2, 3)") && Contains("(5, 4)"));
  CHECK_THROWS_WITH(linear(zeros({2, 4}), zeros({5, 4}), zeros({4})),
                    Contains("linear") && Contains("(4,)"));
  CHECK_THROWS_AS(linear(zeros({2, 4}), zeros({4})), ShapeError);
  CHECK_THROWS_AS(linear(scalar_tensor(1.0), zeros({5, 1})), ShapeError);
  CHECK_THROWS_WITH(linear(zeros({2, 4}), zeros({5, 4}, kFloat64)),
                    Contains("linear") && Contains("float32") && Contains("float64"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
