// Decoding strategies with toy models: a bigram table (stateless) and a history-dependent model
// behind RecomputeNextToken (which exercises reorder). Beam width 1 equals greedy; a hand-checked
// case where beam search beats greedy; beam search as wide as the tree equals exhaustive search;
// sampling is reproducible and draws from the filtered distribution; the end token stops; errors.
#include <cmath>
#include <limits>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::nn;
using Catch::Matchers::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Logits of the next token = the table's row of the last token. Records what it was fed.
struct Bigram final : NextToken {
  Tensor table;  // (V, V) float64
  std::vector<Shape> fed;
  int resets = 0;
  bool grad_mode_seen = false;
  explicit Bigram(Tensor t) : table(std::move(t)) {}
  int64_t vocab_size() const override { return table.size(0); }
  Tensor logits(const Tensor& new_tokens) override {
    fed.push_back(new_tokens.shape());
    grad_mode_seen = grad_mode_seen || GradMode::enabled();
    return index_select(table, 0, new_tokens.select(1, new_tokens.size(1) - 1).contiguous());
  }
  void reorder(const Tensor&) override {}  // stateless
  void reset() override { ++resets; }
};

Tensor log_table(const std::vector<std::vector<double>>& p) {
  std::vector<double> flat;
  for (const auto& row : p)
    for (double x : row) flat.push_back(std::log(x));
  const auto v = static_cast<int64_t>(p.size());
  return from_vector(flat, {v, v});
}

// Tokens: 0 = S (start), 1 = x, 2 = y, 3 = E (end).
Tensor hand_table() {
  return log_table({{0, 0.6, 0.4, 0},      // after S
                    {0, 0.3, 0.3, 0.4},    // after x
                    {0, 0.05, 0.05, 0.9},  // after y
                    {0, 0, 0, 1}});        // after E
}

Tensor random_table(int64_t v, uint64_t seed) {
  Generator g(seed);
  return mul(randn({v, v}, g, kFloat64), 2.0);
}

std::vector<int64_t> ids(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

// Logits that depend on the whole history (order and length), computed on the host.
Tensor history_logits(const Tensor& tokens, int64_t v) {
  const int64_t b = tokens.size(0), t = tokens.size(1);
  const std::vector<int64_t> h = ids(tokens);
  std::vector<double> out;
  for (int64_t r = 0; r < b; ++r) {
    double code = 0;
    for (int64_t j = 0; j < t; ++j)
      code += static_cast<double>((j + 1) * (h[static_cast<size_t>(r * t + j)] + 1));
    for (int64_t k = 0; k < v; ++k)
      out.push_back(
          2.0 * std::sin(1.3 * code + 0.7 * static_cast<double>(k) + 0.1 * static_cast<double>(t)));
  }
  return from_vector(out, {b, v});
}

}  // namespace

TEST_CASE("greedy: argmax each step, the end token stops, the protocol", "[nn][generation]") {
  Bigram m(hand_table());
  // S -> x (0.6) -> E (0.4); y -> E (0.9); the stopped row is padded with E.
  Tensor out = greedy(m, from_vector(std::vector<int64_t>{0, 2}, {2, 1}), 10, 3);
  CHECK(out.shape() == Shape{2, 3});
  CHECK(ids(out) == std::vector<int64_t>{0, 1, 3, 2, 3, 3});
  CHECK(m.resets == 1);
  CHECK(m.fed == std::vector<Shape>{{2, 1}, {2, 1}});  // the prompt, then one token a step
  CHECK_FALSE(m.grad_mode_seen);                       // decoders run under NoGradGuard
  // Without an end token: max_new tokens; a 1-D prompt gives a 1-D result.
  Tensor one = greedy(m, from_vector(std::vector<int64_t>{0}, {1}), 4);
  CHECK(ids(one) == std::vector<int64_t>{0, 1, 3, 3, 3});
  CHECK(ids(greedy(m, from_vector(std::vector<int64_t>{0, 1}, {1, 2}), 0)) ==
        std::vector<int64_t>{0, 1});
}

TEST_CASE("beam search beats greedy on a hand-checked case", "[nn][generation]") {
  // Greedy: S x E, probability 0.6 * 0.4 = 0.24. Beam width 2, length_penalty 1 (sums of
  // log-probabilities; a finished sequence scores sum / new tokens):
  //   step 1: x ln 0.6 = -0.511, y ln 0.4 = -0.916                       -> beams x, y
  //   step 2: yE -0.916 + ln 0.9 = -1.022, xE -0.511 + ln 0.4 = -1.427,
  //           xx = xy = -0.511 + ln 0.3 = -1.715 (tie: lower token first), yx = yy = -3.912
  //           best four: yE, xE finished (ranks 0, 1 < width; scores -0.511, -0.713), xx, xy
  //           the best extension, yE's -1.022 / 2 = -0.511, beats the worst finished -0.713:
  //           not done (transformers' is_done)
  //   step 3: xyE -1.715 + ln 0.9 = -1.820 (score -0.607), xxE -1.715 + ln 0.4 = -2.631
  //           (-0.877), xxx = xxy = -2.919, xyx = xyy = -4.711
  //           finished: yE -0.511, xyE -0.607 (xE -0.713 and xxE drop out); the best
  //           extension's -1.820 / 3 = -0.607 <= -0.607: done.
  // Best: S y E, probability 0.36 > 0.24; second S x y E, ln(0.6 * 0.3 * 0.9) / 3.
  Bigram m(hand_table());
  Tensor prompt = from_vector(std::vector<int64_t>{0}, {1, 1});
  CHECK(ids(greedy(m, prompt, 5, 3)) == std::vector<int64_t>{0, 1, 3});
  BeamResult r =
      beam_search(m, prompt, {.width = 2, .max_new = 5, .end_token = 3, .num_return = 2});
  CHECK(r.sequences.shape() == Shape{1, 2, 4});
  CHECK(ids(r.sequences) == std::vector<int64_t>{0, 2, 3, /* padding */ 3, 0, 1, 2, 3});
  CHECK(ids(r.lengths) == std::vector<int64_t>{3, 4});
  const std::vector<double> s = r.scores.to_vector<double>();
  CHECK(s[0] == Approx(std::log(0.36) / 2).epsilon(1e-12));
  CHECK(s[1] == Approx(std::log(0.6 * 0.3 * 0.9) / 3).epsilon(1e-12));
  // length_penalty 0, the plain sum: at step 3 the best extension, xyE's -1.820, is below the
  // worst finished, xE's -1.427: done with S y E first, S x E second.
  BeamResult plain = beam_search(
      m, prompt, {.width = 2, .max_new = 5, .length_penalty = 0, .end_token = 3, .num_return = 2});
  CHECK(ids(plain.sequences) == std::vector<int64_t>{0, 2, 3, 0, 1, 3});
  CHECK(plain.scores.select(1, 0).item<double>() == Approx(std::log(0.36)).epsilon(1e-12));
  CHECK(plain.scores.select(1, 1).item<double>() == Approx(std::log(0.24)).epsilon(1e-12));
}

TEST_CASE("beam search of width 1 equals greedy", "[nn][generation]") {
  for (uint64_t seed : {1u, 2u, 3u}) {
    Bigram m(random_table(6, seed));
    Tensor prompt = from_vector(std::vector<int64_t>{0, 3, 1, 5, 2, 2}, {3, 2});
    for (std::optional<int64_t> end : {std::optional<int64_t>{}, std::optional<int64_t>{4}}) {
      INFO("seed " << seed << (end ? " with end token" : ""));
      Tensor g = greedy(m, prompt, 8, end);
      BeamResult b = beam_search(m, prompt, {.width = 1, .max_new = 8, .end_token = end});
      CHECK(ids(b.sequences.squeeze(1)) == ids(g));
      // The score is the greedy path's sum of log-probabilities / new tokens.
      Tensor lp = log_softmax(m.table, -1);
      const std::vector<int64_t> gi = ids(g), len = ids(b.lengths);
      for (int64_t r = 0; r < 3; ++r) {
        double sum = 0;
        for (int64_t j = 2; j < len[static_cast<size_t>(r)]; ++j)
          sum += lp.select(0, gi[static_cast<size_t>(r * g.size(1) + j - 1)])
                     .select(0, gi[static_cast<size_t>(r * g.size(1) + j)])
                     .item<double>();
        CHECK(b.scores.select(0, r).item<double>() ==
              Approx(sum / static_cast<double>(len[static_cast<size_t>(r)] - 2)).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("beam search as wide as the tree finds the exhaustive best (reorder keeps histories)",
          "[nn][generation]") {
  const int64_t v = 3;
  RecomputeNextToken model([v](const Tensor& tokens) { return history_logits(tokens, v); }, v);
  Tensor prompts = from_vector(std::vector<int64_t>{0, 1, 2, 2}, {2, 2});
  // width 9 = 3^2 keeps every prefix until the last step: the best of the 27 continuations.
  BeamResult r = beam_search(model, prompts, {.width = 9, .max_new = 3, .length_penalty = 0});
  for (int64_t row = 0; row < 2; ++row) {
    double best = -kInf;
    std::vector<int64_t> best_seq;
    for (int64_t c = 0; c < 27; ++c) {
      std::vector<int64_t> seq = ids(prompts.select(0, row));
      double sum = 0;
      for (int64_t step = 0, code = c; step < 3; ++step, code /= 3) {
        const Tensor hist = from_vector(seq, {1, static_cast<int64_t>(seq.size())});
        const int64_t tok = code % 3;
        sum += log_softmax(history_logits(hist, v), -1).select(1, tok).item<double>();
        seq.push_back(tok);
      }
      if (sum > best) {
        best = sum;
        best_seq = seq;
      }
    }
    INFO("row " << row);
    CHECK(ids(r.sequences.select(0, row).select(0, 0)) == best_seq);
    CHECK(r.scores.select(0, row).select(0, 0).item<double>() == Approx(best).epsilon(1e-12));
  }
}

TEST_CASE("sampling: reproducible, top_k = 1 is greedy, draws follow the filtered softmax",
          "[nn][generation]") {
  Bigram m(random_table(8, 11));
  Tensor prompt = from_vector(std::vector<int64_t>{0, 5}, {2, 1});
  const SamplingOptions opt{.temperature = 0.8, .top_k = 5, .top_p = 0.9};
  Generator a(3), b(3), c(4);
  Tensor sa = sample(m, prompt, 20, opt, a);
  CHECK(sa.shape() == Shape{2, 21});
  CHECK(ids(sa) == ids(sample(m, prompt, 20, opt, b)));
  CHECK(ids(sa) != ids(sample(m, prompt, 20, {}, c)));
  Generator restored;
  restored.set_state(a.seed(), a.offset());
  CHECK(ids(sample(m, prompt, 5, opt, a)) == ids(sample(m, prompt, 5, opt, restored)));
  CHECK(ids(sample(m, prompt, 12, {.top_k = 1}, c)) == ids(greedy(m, prompt, 12)));
  // 50k rows of one token: the first new token's frequencies against the filtered softmax.
  const int64_t n = 50000;
  Tensor many = sample(m, zeros({n, 1}, kInt64), 1, opt, c).select(1, 1).contiguous();
  Tensor p =
      softmax(top_p_filter(top_k_filter(apply_temperature(m.table.select(0, 0), 0.8), 5), 0.9), -1);
  const std::vector<double> expected = p.to_vector<double>();
  std::vector<double> count(8, 0);
  for (int64_t t : ids(many)) count[static_cast<size_t>(t)] += 1;
  double chi2 = 0;
  int64_t df = -1;
  for (size_t t = 0; t < 8; ++t) {
    if (expected[t] == 0) {
      CHECK(count[t] == 0);
      continue;
    }
    chi2 += std::pow(count[t] - n * expected[t], 2) / (n * expected[t]);
    ++df;
  }
  // 0.999 quantiles of chi-square (NIST/SEMATECH table) for df 1..4.
  const double critical[] = {10.828, 13.816, 16.266, 18.467};
  REQUIRE(df >= 1);
  REQUIRE(df <= 4);
  CHECK(chi2 < critical[df - 1]);
  // With an end token, sampling stops too: E is absorbing and certain after E.
  Bigram hand(hand_table());
  Generator g(9);
  Tensor ended =
      sample(hand, from_vector(std::vector<int64_t>{3}, {1, 1}), 10, {.end_token = 3}, g);
  CHECK(ids(ended) == std::vector<int64_t>{3, 3});
}

TEST_CASE("decoders refuse bad arguments with clear errors", "[nn][generation]") {
  Bigram m(hand_table());
  Tensor prompt = from_vector(std::vector<int64_t>{0}, {1, 1});
  Generator g(1);
  CHECK_THROWS_WITH(beam_search(m, prompt, {.width = 0}),
                    Contains("beam_search") && Contains("width must be >= 1, got 0"));
  CHECK_THROWS_WITH(beam_search(m, prompt, {.width = 2, .num_return = 3}), Contains("num_return"));
  for (double p : {0.0, 1.5, -0.2})
    CHECK_THROWS_WITH(sample(m, prompt, 3, {.top_p = p}, g),
                      Contains("sample") && Contains("top_p must be in (0, 1]"));
  CHECK_THROWS_WITH(sample(m, prompt, 3, {.temperature = 0}, g), Contains("temperature"));
  CHECK_THROWS_WITH(sample(m, prompt, 3, {.top_k = -1}, g), Contains("top_k"));
  Tensor outside = from_vector(std::vector<int64_t>{0, 4}, {1, 2});
  CHECK_THROWS_AS(greedy(m, outside, 3), IndexError);
  CHECK_THROWS_WITH(greedy(m, outside, 3),
                    Contains("greedy") && Contains("token 4") && Contains("vocabulary of 4"));
  CHECK_THROWS_AS(beam_search(m, from_vector(std::vector<int64_t>{-1}, {1, 1}), {}), IndexError);
  CHECK_THROWS_AS(sample(m, outside, 3, {}, g), IndexError);
  CHECK_THROWS_WITH(greedy(m, prompt, -1), Contains("max_new must be >= 0, got -1"));
  CHECK_THROWS_WITH(sample(m, prompt, -2, {}, g), Contains("max_new"));
  CHECK_THROWS_WITH(beam_search(m, prompt, {.max_new = -1}), Contains("max_new"));
  CHECK_THROWS_AS(greedy(m, prompt, 3, 7), IndexError);  // end token outside the vocabulary
  CHECK_THROWS_AS(greedy(m, ones({1, 2}), 3), DTypeError);
  CHECK_THROWS_AS(greedy(m, zeros({1, 0}, kInt64), 3), ShapeError);
  CHECK(g.offset() == 0u);  // nothing drawn by the refused calls

  // A model giving logits of the wrong shape, and one without reorder under beam search.
  struct Wrong final : NextToken {
    int64_t vocab_size() const override { return 4; }
    Tensor logits(const Tensor& t) override { return zeros({t.size(0), 3}); }
  } wrong;
  CHECK_THROWS_WITH(greedy(wrong, prompt, 2), Contains("greedy") && Contains("(1, 3)"));
  struct NoReorder final : NextToken {
    int64_t vocab_size() const override { return 3; }
    Tensor logits(const Tensor& t) override { return zeros({t.size(0), 3}); }
  } no_reorder;
  CHECK_THROWS_WITH(beam_search(no_reorder, prompt, {.width = 2, .max_new = 3}),
                    Contains("NextToken::reorder"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
