// Long inputs (nn/long_input.h): truncation vs overlapping windows with combined logits.
#include "nabla/nn/long_input.h"

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// A stand-in classifier with two classes: token 'a' votes for class 0, anything else for 1.
// Logits are the shares of each, scaled, so a window's vote is its majority.
Tensor vote_classifier(const std::vector<std::vector<int64_t>>& windows) {
  std::vector<double> logits;
  for (const auto& w : windows) {
    const auto a = static_cast<double>(std::count(w.begin(), w.end(), int64_t{'a'}));
    const auto n = static_cast<double>(w.size());
    logits.push_back(4.0 * a / n);
    logits.push_back(4.0 * (n - a) / n);
  }
  return from_vector(logits, {static_cast<int64_t>(windows.size()), 2});
}

}  // namespace

TEST_CASE("long input: windows cover every token, each at most max_len", "[long_input]") {
  for (size_t length : {1, 127, 128, 129, 200, 1000, 1001}) {
    for (size_t stride : {0, 1, 50, 64, 128}) {
      const nn::LongInputOptions o{nn::LongInputMode::Windows, 128, stride};
      const auto windows = nn::long_input_windows(length, o);
      std::vector<int> seen(length, 0);
      for (const auto& w : windows) {
        REQUIRE(w.end <= length);
        REQUIRE(w.size() == std::min<size_t>(length, 128));
        for (size_t i = w.begin; i < w.end; ++i) ++seen[i];
      }
      for (size_t i = 0; i < length; ++i) REQUIRE(seen[i] > 0);
      REQUIRE(windows.back().end == length);
      if (length <= 128) REQUIRE(windows.size() == 1);
    }
  }
  const auto halves = nn::long_input_windows(256, {nn::LongInputMode::Windows, 128, 0});
  REQUIRE(halves.size() == 3);  // [0,128) [64,192) [128,256)
  REQUIRE(halves[1].begin == 64);
  const auto cut = nn::long_input_windows(1000, {nn::LongInputMode::Truncate, 128, 0});
  REQUIRE(cut.size() == 1);
  REQUIRE(cut[0].begin == 0);
  REQUIRE(cut[0].end == 128);
}

TEST_CASE("long input: a text that changes class after max_len", "[long_input]") {
  // 128 tokens of class 0, then 900 of class 1: the beginning says 0, the majority says 1.
  std::vector<int64_t> tokens(128, 'a');
  tokens.insert(tokens.end(), 900, 'b');
  const Tensor windows =
      nn::classify_long_input(tokens, {nn::LongInputMode::Windows, 128, 0}, vote_classifier);
  const Tensor truncated =
      nn::classify_long_input(tokens, {nn::LongInputMode::Truncate, 128, 0}, vote_classifier);
  REQUIRE(argmax(windows, 0).item() == 1);
  REQUIRE(argmax(truncated, 0).item() == 0);
  // Both are normalised log-probabilities.
  REQUIRE(sum(exp(windows)).item() == Approx(1.0).epsilon(1e-12));
  REQUIRE(sum(exp(truncated)).item() == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("long input: combination rule", "[long_input]") {
  // One window: plain log_softmax.
  const Tensor one = from_vector(std::vector<double>{1.0, -2.0, 0.5}, {1, 3});
  CHECK_CLOSE(nn::combine_window_logits(one, {7}), log_softmax(one, 1).squeeze(0), 1e-12, 1e-12);
  // Two windows weighted 3:1, checked by hand.
  const Tensor two = from_vector(std::vector<double>{2.0, 0.0, 0.0, 2.0}, {2, 2});
  const auto lp = log_softmax(two, 1).to_vector<double>();  // row-major (2, 2)
  const double m0 = 0.75 * lp[0] + 0.25 * lp[2];
  const double m1 = 0.75 * lp[1] + 0.25 * lp[3];
  const double norm = std::log(std::exp(m0) + std::exp(m1));
  const auto combined = nn::combine_window_logits(two, {3, 1}).to_vector<double>();
  REQUIRE(combined[0] == Approx(m0 - norm).epsilon(1e-12));
  REQUIRE(combined[1] == Approx(m1 - norm).epsilon(1e-12));
}

TEST_CASE("long input: bad options and shapes are clear errors", "[long_input]") {
  REQUIRE_THROWS_WITH(nn::parse_long_input_mode("chunks"),
                      Catch::Contains("'chunks' is not one of: truncate, windows"));
  REQUIRE(nn::parse_long_input_mode("truncate") == nn::LongInputMode::Truncate);
  REQUIRE_THROWS_AS(nn::long_input_windows(10, {nn::LongInputMode::Windows, 0, 0}), ValueError);
  REQUIRE_THROWS_WITH(nn::long_input_windows(500, {nn::LongInputMode::Windows, 128, 129}),
                      Catch::Contains("stride 129"));
  REQUIRE_THROWS_AS(nn::combine_window_logits(zeros({2, 3}), {1}), ShapeError);
  REQUIRE_THROWS_AS(nn::combine_window_logits(zeros({1, 3}), {0}), ValueError);
  REQUIRE_THROWS_WITH(nn::classify_long_input({}, {}, vote_classifier), Catch::Contains("empty"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
