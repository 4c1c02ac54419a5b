// multinomial: reproducible from a seed and from a restored generator, chi-square goodness of
// fit on 100k draws with replacement, exact inclusion frequencies without replacement, errors.
#include <cmath>
#include <limits>
#include <map>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The 0.999 quantile of chi-square with df = 1..10 degrees of freedom (NIST/SEMATECH e-Handbook
// of Statistical Methods, 1.3.6.7.4, "Critical values of the chi-square distribution").
double chi2_critical_999(int64_t df) {
  static const double table[] = {10.828, 13.816, 16.266, 18.467, 20.515,
                                 22.458, 24.322, 26.124, 27.877, 29.588};
  REQUIRE(df >= 1);
  REQUIRE(df <= 10);
  return table[df - 1];
}

// Pearson's chi-square of the draws against weights w (categories of weight 0 must never occur).
void check_fit(const std::vector<int64_t>& draws, const std::vector<double>& w) {
  std::vector<double> count(w.size(), 0.0);
  for (int64_t d : draws) {
    REQUIRE(d >= 0);
    REQUIRE(d < static_cast<int64_t>(w.size()));
    count[static_cast<size_t>(d)] += 1;
  }
  double total = 0, chi2 = 0;
  for (double x : w) total += x;
  int64_t df = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) {
      CHECK(count[i] == 0);
      continue;
    }
    const double expected = static_cast<double>(draws.size()) * w[i] / total;
    chi2 += (count[i] - expected) * (count[i] - expected) / expected;
    ++df;
  }
  INFO("chi-square " << chi2 << " with " << df << " degrees of freedom");
  CHECK(chi2 < chi2_critical_999(df));
}

}  // namespace

TEST_CASE("multinomial with replacement fits the weights (chi-square, 100k draws)",
          "[ops][sampling]") {
  const std::vector<std::vector<double>> dists = {
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},         // uniform
      {0.5, 0.25, 0.125, 0.0625, 0.0625},     // skewed, normalised
      {0, 3, 0, 1, 6},                        // zeros, unnormalised
      {1e-3, 1, 1e-3, 2, 0.5, 0.5, 7, 1e-2},  // rare categories
  };
  Generator gen(2026);
  for (const auto& w : dists) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("weights of size " << w.size() << ", " << dtype_name(dt));
      Tensor probs = from_vector(w, {static_cast<int64_t>(w.size())}).to(dt);
      Tensor draws = multinomial(probs, 100000, /*replacement=*/true, gen);
      CHECK(draws.dtype() == kInt64);
      CHECK(draws.shape() == Shape{100000});
      check_fit(draws.to_vector<int64_t>(), w);
    }
  }
  // (B, V): each row its own distribution, 100k draws each, in one call.
  Tensor rows = from_vector(std::vector<double>{1, 2, 3, 4, 0, 0, 5, 5}, {2, 4});
  Tensor d = multinomial(rows, 100000, true, gen);
  CHECK(d.shape() == Shape{2, 100000});
  check_fit(d.select(0, 0).contiguous().to_vector<int64_t>(), {1, 2, 3, 4});
  check_fit(d.select(0, 1).contiguous().to_vector<int64_t>(), {0, 0, 5, 5});
}

TEST_CASE("multinomial without replacement: exact inclusion and first-draw frequencies",
          "[ops][sampling]") {
  // Weights 1, 2, 3, 4 (W = 10), two draws. P(i first) = w_i / W; P(i drawn) = w_i / W +
  // sum_{j != i} (w_j / W) (w_i / (W - w_j)).
  const std::vector<double> w = {1, 2, 3, 4};
  const int64_t n = 100000;
  Generator gen(7);
  Tensor probs = from_vector(w, {1, 4}).expand({n, 4});
  const std::vector<int64_t> d = multinomial(probs, 2, false, gen).to_vector<int64_t>();
  std::vector<double> first(4, 0), drawn(4, 0);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t a = d[static_cast<size_t>(2 * r)], b = d[static_cast<size_t>(2 * r + 1)];
    REQUIRE(a != b);
    first[static_cast<size_t>(a)] += 1;
    drawn[static_cast<size_t>(a)] += 1;
    drawn[static_cast<size_t>(b)] += 1;
  }
  for (size_t i = 0; i < 4; ++i) {
    double p_drawn = w[i] / 10;
    for (size_t j = 0; j < 4; ++j)
      if (j != i) p_drawn += w[j] / 10 * w[i] / (10 - w[j]);
    const double p_first = w[i] / 10;
    INFO("category " << i << ": drawn " << drawn[i] / n << " vs " << p_drawn << ", first "
                     << first[i] / n << " vs " << p_first);
    // 5 standard deviations of a frequency over n draws.
    CHECK(std::abs(drawn[i] / n - p_drawn) < 5 * std::sqrt(p_drawn * (1 - p_drawn) / n));
    CHECK(std::abs(first[i] / n - p_first) < 5 * std::sqrt(p_first * (1 - p_first) / n));
  }
  // As many draws as non-zero weights: a permutation of them, zeros never drawn.
  Tensor z = from_vector(std::vector<double>{0, 2, 0, 1, 5}, {5});
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<int64_t> all = multinomial(z, 3, false, gen).to_vector<int64_t>();
    std::sort(all.begin(), all.end());
    CHECK(all == std::vector<int64_t>{1, 3, 4});
  }
}

TEST_CASE("multinomial: the same seed gives the same draws; a restored generator continues",
          "[ops][sampling]") {
  Tensor probs = from_vector(std::vector<double>{0.1, 0.2, 0.3, 0.4, 1, 1, 1, 1}, {2, 4});
  for (bool replacement : {true, false}) {
    INFO("replacement " << replacement);
    Generator a(42), b(42), c(43);
    const auto da = multinomial(probs, 3, replacement, a).to_vector<int64_t>();
    CHECK(da == multinomial(probs, 3, replacement, b).to_vector<int64_t>());
    // Counters used: B * num_samples with replacement, B * V without.
    CHECK(a.offset() == (replacement ? 6u : 8u));
    // A checkpoint is (seed, offset): a generator restored from it draws what a would draw next.
    Generator restored;
    restored.set_state(a.seed(), a.offset());
    CHECK(multinomial(probs, 3, replacement, a).to_vector<int64_t>() ==
          multinomial(probs, 3, replacement, restored).to_vector<int64_t>());
    // Another seed, 20 draws of 2 rows: differs somewhere.
    Generator a2(42);
    CHECK(multinomial(probs, 20, true, a2).to_vector<int64_t>() !=
          multinomial(probs, 20, true, c).to_vector<int64_t>());
  }
  // The default generator overload draws from default_generator().
  manual_seed(5);
  const auto d1 = multinomial(probs, 4, true).to_vector<int64_t>();
  Generator g5(5);
  CHECK(d1 == multinomial(probs, 4, true, g5).to_vector<int64_t>());
  CHECK(multinomial(zeros({0, 3}), 2, true).shape() == Shape{0, 2});
}

TEST_CASE("multinomial errors name the problem", "[ops][sampling]") {
  Generator g(1);
  auto call = [&](std::vector<double> w, int64_t n, bool rep) {
    multinomial(from_vector(w, {static_cast<int64_t>(w.size())}), n, rep, g);
  };
  CHECK_THROWS_AS(call({0.5, -0.1, 1}, 1, true), ValueError);
  CHECK_THROWS_WITH(call({0.5, -0.1, 1}, 1, true), Contains("multinomial") && Contains("-0.1"));
  CHECK_THROWS_WITH(call({0.5, kNaN}, 1, true), Contains("multinomial") && Contains("nan"));
  CHECK_THROWS_WITH(call({0.5, kInf}, 1, true), Contains("inf"));
  CHECK_THROWS_WITH(call({0, 0, 0}, 1, true), Contains("all zero"));
  CHECK_THROWS_WITH(call({1, 2}, 0, true), Contains("num_samples must be >= 1"));
  CHECK_THROWS_WITH(
      call({1, 0, 2}, 3, false),
      Contains("cannot draw 3 samples without replacement") && Contains("2 non-zero"));
  CHECK_NOTHROW(call({1, 0, 2}, 3, true));
  CHECK_THROWS_WITH(multinomial(from_vector(std::vector<double>{1, 1, 0, 0}, {2, 2}), 1, true, g),
                    Contains("row 1") && Contains("all zero"));
  CHECK_THROWS_AS(multinomial(ones({3}, kInt64), 1, true, g), DTypeError);
  CHECK_THROWS_AS(multinomial(ones({2, 2, 2}), 1, true, g), ShapeError);
  CHECK_THROWS_AS(multinomial(scalar_tensor(1.0), 1, true, g), ShapeError);
  CHECK_THROWS_WITH(multinomial(ones({2, 0}), 1, true, g), Contains("no categories"));
  // A failed call draws nothing: the stream is where it was.
  CHECK(g.offset() == 3u);
}

TEST_CASE("multinomial draws do not depend on the thread count", "[ops][sampling]") {
  // 4096 rows of 64 weights: over the parallel grain, so 2 threads split the rows.
  Generator w(8);
  Tensor probs = w.uniform({4096, 64}, 0.0, 1.0, kFloat64);
  const int prev = num_threads();
  const bool adaptive = adaptive_threads();
  set_adaptive_threads(false);
  std::vector<std::vector<int64_t>> runs;
  for (int threads : {1, 2})
    for (bool replacement : {true, false}) {
      set_num_threads(threads);
      Generator g(77);
      runs.push_back(multinomial(probs, 5, replacement, g).to_vector<int64_t>());
    }
  set_num_threads(prev);
  set_adaptive_threads(adaptive);
  CHECK(runs[0] == runs[2]);
  CHECK(runs[1] == runs[3]);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
