// kl_div and distillation_loss: PyTorch parity (tests/fixtures/gen_divergence.py), float64
// gradcheck and gradgradcheck over broadcast, non-contiguous, size-1 and size-0 shapes, the
// reductions' divisors, the t == 0 convention, agreement with the composite twin, errors.
#include <cmath>

#include "tests/helpers.h"
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::check_parity;
using test::leaf;
using test::positive_leaf;

// The error's type, and a message naming what it must name.
#define CHECK_THROWS_NAMING(expr, type, text) \
  do {                                        \
    CHECK_THROWS_AS(expr, type);              \
    CHECK_THROWS_WITH(expr, Contains(text));  \
  } while (0)

namespace {

constexpr const char* kFamily = "divergence";

KlDivOptions opts(KlDivReduction r, bool log_target = false) {
  return {.reduction = r, .log_target = log_target};
}

const std::pair<KlDivReduction, const char*> kReductions[] = {
    {KlDivReduction::None, "none"},
    {KlDivReduction::Sum, "sum"},
    {KlDivReduction::Mean, "mean"},
    {KlDivReduction::BatchMean, "batchmean"}};

}  // namespace

TEST_CASE("kl_div matches PyTorch", "[loss][kl_div][parity]") {
  for (auto [red, tag] : kReductions) {
    const std::string name = std::string("kl_") + tag;
    check_parity(kFamily, name, [r = red](auto& v) { return kl_div(v[0], v[1], opts(r)); });
    check_parity(kFamily, name + "_log_target",
                 [r = red](auto& v) { return kl_div(v[0], v[1], opts(r, true)); });
  }
  check_parity(kFamily, "kl_broadcast_target",
               [](auto& v) { return kl_div(v[0], v[1], opts(KlDivReduction::Sum)); });
  check_parity(kFamily, "kl_broadcast_input",
               [](auto& v) { return kl_div(v[0], v[1], opts(KlDivReduction::BatchMean)); });
  check_parity(kFamily, "kl_transposed",
               [](auto& v) { return kl_div(v[0].t(), v[1], opts(KlDivReduction::BatchMean)); });
  check_parity(kFamily, "kl_3d_mean", [](auto& v) { return kl_div(v[0], v[1]); });
  check_parity(kFamily, "kl_0d_batchmean",
               [](auto& v) { return kl_div(v[0], v[1], opts(KlDivReduction::BatchMean)); });
}

TEST_CASE("distillation_loss matches PyTorch", "[loss][distill][parity]") {
  check_parity(kFamily, "distill_t4_a07",
               [](auto& v) { return distillation_loss(v[0], v[1], v[2], 4.0, 0.7); });
  check_parity(kFamily, "distill_t1_a05",
               [](auto& v) { return distillation_loss(v[0], v[1], v[2], 1.0, 0.5); });
  check_parity(kFamily, "distill_t2_a1",
               [](auto& v) { return distillation_loss(v[0], v[1], v[2], 2.0, 1.0); });
}

TEST_CASE("kl_div gradcheck over shapes, layouts and reductions", "[loss][kl_div]") {
  struct Case {
    const char* name;
    Tensor x, t;
  };
  const Case cases[] = {
      {"(3, 4)", leaf({3, 4}, 1), positive_leaf({3, 4}, 2)},
      {"broadcast target (1, 4)", leaf({3, 4}, 3), positive_leaf({1, 4}, 4)},
      {"broadcast input (4,) vs (2, 3, 4)", leaf({4}, 5), positive_leaf({2, 3, 4}, 6)},
      {"transposed input", leaf({4, 3}, 7).t(), positive_leaf({3, 4}, 8)},
      {"size-1 (1, 1)", leaf({1, 1}, 9), positive_leaf({1, 1}, 10)},
      {"size-0 (0, 4)", leaf({0, 4}, 11), positive_leaf({0, 4}, 12)},
      {"0-d", leaf({}, 13), positive_leaf({}, 14)},
  };
  for (const Case& c : cases) {
    for (auto [red, tag] : kReductions) {
      // 0 / 0 has no derivative: an empty mean/batchmean is NaN (checked below).
      if (c.x.numel() == 0 && (red == KlDivReduction::Mean || red == KlDivReduction::BatchMean))
        continue;
      for (bool log_target : {false, true}) {
        INFO(c.name << ", " << tag << (log_target ? ", log_target" : ""));
        auto fn = [r = red, log_target](const std::vector<Tensor>& v) {
          return kl_div(v[0], v[1], opts(r, log_target));
        };
        CHECK_GRADCHECK(fn, (std::vector<Tensor>{c.x, c.t}));
        CHECK_GRADGRADCHECK(fn, (std::vector<Tensor>{c.x, c.t}));
        auto twin = [r = red, log_target](const std::vector<Tensor>& v) {
          return kl_div_composite(v[0], v[1], opts(r, log_target));
        };
        CHECK_CLOSE(fn({c.x, c.t}), twin({c.x, c.t}), 1e-12, 1e-12);
      }
    }
  }
}

TEST_CASE("kl_div reductions divide by what PyTorch divides by", "[loss][kl_div]") {
  Tensor x = log_softmax(leaf({4, 5}, 21).detach(), -1);
  Tensor t = softmax(leaf({4, 5}, 22).detach(), -1);
  const double total = kl_div(x, t, opts(KlDivReduction::Sum)).item<double>();
  CHECK(total > 0.0);                                        // KL of two different distributions
  CHECK(kl_div(x, t).item<double>() == Approx(total / 20));  // mean: batch x support
  CHECK(kl_div(x, t, opts(KlDivReduction::BatchMean)).item<double>() == Approx(total / 4));
  CHECK(sum(kl_div(x, t, opts(KlDivReduction::None))).item<double>() == Approx(total));
  // log_target with log t is the same loss.
  CHECK(kl_div(x, log(t), opts(KlDivReduction::Sum, true)).item<double>() == Approx(total));
  // Identical distributions: exactly zero divergence.
  CHECK(kl_div(log(t), t, opts(KlDivReduction::Sum)).item<double>() == Approx(0.0).margin(1e-12));
  // Empty batch: sum is 0, mean and batchmean are 0 / 0.
  CHECK(kl_div(zeros({0, 3}), zeros({0, 3}), opts(KlDivReduction::Sum)).item<float>() == 0.0f);
  CHECK(std::isnan(kl_div(zeros({0, 3}), zeros({0, 3})).item<float>()));
  CHECK(std::isnan(
      kl_div(zeros({0, 3}), zeros({0, 3}), opts(KlDivReduction::BatchMean)).item<float>()));
}

TEST_CASE("kl_div: a zero target contributes 0 (0 log 0 = 0)", "[loss][kl_div]") {
  Tensor x = from_vector<double>({-1.0, -2.0, -0.5}, {3}).requires_grad_();
  Tensor t = from_vector<double>({0.0, 0.5, 0.5}, {3});
  Tensor y = kl_div(x, t, opts(KlDivReduction::Sum));
  const double expected = 0.5 * (std::log(0.5) + 2.0) + 0.5 * (std::log(0.5) + 0.5);
  CHECK(y.item<double>() == Approx(expected));
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{-0.0, -0.5, -0.5});
}

TEST_CASE("kl_div errors name the op and the shapes", "[loss][kl_div][errors]") {
  CHECK_THROWS_NAMING(kl_div(zeros({2, 3}), zeros({2, 4})), ShapeError, "kl_div");
  CHECK_THROWS_NAMING(kl_div(zeros({2, 3}), zeros({2, 3}, kFloat64)), DTypeError, "kl_div");
  CHECK_THROWS_NAMING(kl_div(arange(3), arange(3)), DTypeError, "kl_div");
}

TEST_CASE("distillation_loss: gradients, limits and errors", "[loss][distill]") {
  Tensor s = leaf({5, 4}, 31), t = leaf({5, 4}, 32);
  Tensor y = from_vector<int64_t>({0, 3, 1, 2, 3}, {5});
  auto fn = [&y](const std::vector<Tensor>& v) {
    return distillation_loss(v[0], v[1], y, 3.0, 0.6);
  };
  CHECK_GRADCHECK(fn, (std::vector<Tensor>{s, t}));
  CHECK_GRADGRADCHECK(fn, (std::vector<Tensor>{s, t}));
  // alpha 0: plain cross entropy; alpha 1 with the teacher's own logits: zero.
  CHECK(distillation_loss(s, t, y, 2.0, 0.0).item<double>() ==
        Approx(cross_entropy(s, y).item<double>()));
  CHECK(distillation_loss(s, s, y, 2.0, 1.0).item<double>() == Approx(0.0).margin(1e-12));
  // The soft term is T^2 * batchmean KL of the tempered distributions.
  const double T = 3.0;
  const double kl =
      kl_div(log_softmax(div(s, T), -1), softmax(div(t, T), -1), opts(KlDivReduction::BatchMean))
          .item<double>();
  CHECK(distillation_loss(s, t, y, T, 1.0).item<double>() == Approx(T * T * kl));

  CHECK_THROWS_NAMING(distillation_loss(s, t, y, 0.0, 0.5), ValueError, "temperature");
  CHECK_THROWS_NAMING(distillation_loss(s, t, y, 2.0, 1.5), ValueError, "alpha");
  CHECK_THROWS_NAMING(distillation_loss(s, leaf({5, 3}), y, 2.0, 0.5), ShapeError,
                      "distillation_loss");
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef CHECK_THROWS_NAMING
