// nn::Seq2SeqNextToken: the RNN encoder-decoder decoded by nn::greedy and nn::beam_search, for
// every variant (GRU/LSTM, Bahdanau attention or none, bidirectional encoder). Greedy through it
// equals EncoderDecoder::greedy_decode; beam width 1 equals greedy; beam 4 scores at least
// greedy's score; every beam score equals a teacher-forced recompute of its sequence; and beam
// search, which reorders the per-row decoder states, equals the same search over a model that
// recomputes every step from scratch, and exhaustive search on a tiny vocabulary.
#include <cmath>
#include <functional>

#include "nabla/nn/generation.h"
#include "nabla/nn/seq2seq.h"
#include "tests/helpers.h"
#include "tests/nn/seq2seq_helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using nn::Seq2SeqOptions;
using test::tokens;

namespace {

constexpr int64_t kBos = 1, kEos = 2;

// A float64 model of the variant, 2 layers, vocabulary v, in eval mode, seeded.
std::shared_ptr<nn::EncoderDecoder> model_of(Seq2SeqOptions o, int64_t v, uint64_t seed) {
  o.dtype = kFloat64;
  o.num_layers = 2;
  manual_seed(seed);
  auto model = test::make_seq2seq(v, 4, 6, o);
  model->eval();
  return model;
}

// b sources of s tokens in [0, v), and their valid lengths (all s: no padding).
std::pair<Tensor, Tensor> sources(int64_t b, int64_t s, int64_t v, uint64_t seed) {
  Generator gen(seed);
  return {randint(0, v, {b, s}, gen), full({b}, static_cast<double>(s), kInt64)};
}

// The new tokens of a decoded row (after the bos prompt) up to and including the first eos.
std::vector<int64_t> new_tokens(const Tensor& row, int64_t length) {
  const std::vector<int64_t> ids = row.contiguous().to_vector<int64_t>();
  std::vector<int64_t> out;
  for (int64_t t = 1; t < length; ++t) {
    out.push_back(ids[static_cast<size_t>(t)]);
    if (out.back() == kEos) break;
  }
  return out;
}

// beam_search's score of `continuation` after bos, recomputed by one teacher-forced forward of
// source row r: the sum of its tokens' log-probabilities over their count (length penalty 1).
double score_of(nn::EncoderDecoder& model, const Tensor& src, const Tensor& valid, int64_t r,
                const std::vector<int64_t>& continuation) {
  NoGradGuard no_grad;
  const auto n = std::ssize(continuation);
  std::vector<int64_t> tgt_in = {kBos};
  tgt_in.insert(tgt_in.end(), continuation.begin(), continuation.end() - 1);
  const Tensor logp = log_softmax(
      model(src.narrow(0, r, 1), tokens(tgt_in, {1, n}), valid.narrow(0, r, 1)), -1);  // (1, n, V)
  const std::vector<double> lp = logp.contiguous().to_vector<double>();
  const int64_t v = logp.size(-1);
  double sum = 0;
  for (int64_t t = 0; t < n; ++t) sum += lp[static_cast<size_t>(t * v + continuation[t])];
  return sum / static_cast<double>(n);
}

}  // namespace

TEST_CASE("Seq2SeqNextToken: greedy equals greedy_decode; beam width 1 equals greedy", "[nn]") {
  const int64_t V = 7, B = 3, S = 5, max_new = 6;
  uint64_t seed = 10;
  for (const Seq2SeqOptions& o : test::seq2seq_variants()) {
    INFO(nn::seq2seq_flags(o));
    auto model = model_of(o, V, ++seed);
    const auto [src, valid] = sources(B, S, V, seed);
    nn::Seq2SeqNextToken next(*model, src, valid);
    CHECK(next.vocab_size() == V);
    const Tensor prompt = full({B, 1}, static_cast<double>(kBos), kInt64);
    const Tensor greedy = nn::greedy(next, prompt, max_new, kEos);
    const nn::BeamResult beam1 =
        nn::beam_search(next, prompt, {.width = 1, .max_new = max_new, .end_token = kEos});
    for (int64_t r = 0; r < B; ++r) {
      INFO("row " << r);
      const std::vector<int64_t> g = new_tokens(greedy.select(0, r), greedy.size(1));
      std::vector<int64_t> without_eos = g;
      if (!g.empty() && g.back() == kEos) without_eos.pop_back();
      CHECK(model->greedy_decode(src.select(0, r), S, kBos, kEos, max_new).tokens == without_eos);
      const auto length = beam1.lengths.select(0, r).select(0, 0).item<int64_t>();
      CHECK(new_tokens(beam1.sequences.select(0, r).select(0, 0), length) == g);
      CHECK(std::abs(beam1.scores.select(0, r).select(0, 0).item<double>() -
                     score_of(*model, src, valid, r, g)) < 1e-9);
    }
  }
}

TEST_CASE("Seq2SeqNextToken: beam 4 scores at least greedy's; scores are the model's", "[nn]") {
  const int64_t V = 7, B = 2, max_new = 8;
  uint64_t seed = 100;
  for (const Seq2SeqOptions& o : test::seq2seq_variants())
    for (int64_t S : {3, 6, 9}) {
      INFO(nn::seq2seq_flags(o) << ", source length " << S);
      auto model = model_of(o, V, ++seed);
      const auto [src, valid] = sources(B, S, V, seed);
      nn::Seq2SeqNextToken next(*model, src, valid);
      const Tensor prompt = full({B, 1}, static_cast<double>(kBos), kInt64);
      const Tensor greedy = nn::greedy(next, prompt, max_new, kEos);
      const nn::BeamResult beam = nn::beam_search(
          next, prompt, {.width = 4, .max_new = max_new, .length_penalty = 1, .end_token = kEos});
      for (int64_t r = 0; r < B; ++r) {
        const double greedy_score =
            score_of(*model, src, valid, r, new_tokens(greedy.select(0, r), greedy.size(1)));
        const double beam_score = beam.scores.select(0, r).select(0, 0).item<double>();
        const std::vector<int64_t> best =
            new_tokens(beam.sequences.select(0, r).select(0, 0),
                       beam.lengths.select(0, r).select(0, 0).item<int64_t>());
        INFO("row " << r << ": greedy " << greedy_score << ", beam " << beam_score);
        CHECK(beam_score >= greedy_score - 1e-12);
        // The adapter's logits after reorders are the model's: the same score from scratch.
        CHECK(std::abs(beam_score - score_of(*model, src, valid, r, best)) < 1e-9);
      }
    }
}

TEST_CASE("Seq2SeqNextToken: beam search equals a from-scratch recompute and exhaustive search",
          "[nn]") {
  uint64_t seed = 200;
  for (const Seq2SeqOptions& o : test::seq2seq_variants()) {
    INFO(nn::seq2seq_flags(o));
    {  // Two sources, width 3: every step's beams come from both rows' states, reordered.
      const int64_t V = 7, B = 2, S = 4, width = 3;
      auto model = model_of(o, V, ++seed);
      const auto [src, valid] = sources(B, S, V, seed);
      // From scratch: the whole history teacher-forced through the model; its rows are the
      // sources' (B rows) or their beams' (B * width rows, source r's at r * width...).
      nn::RecomputeNextToken recompute(
          [&model, s = src, l = valid](const Tensor& history) {
            const int64_t rows = history.size(0);
            std::vector<int64_t> source_of;
            for (int64_t i = 0; i < rows; ++i) source_of.push_back(i * B / rows);
            const Tensor idx = from_vector(source_of, {rows});
            return (*model)(index_select(s, 0, idx), history, index_select(l, 0, idx));
          },
          V);
      nn::Seq2SeqNextToken next(*model, src, valid);
      const nn::BeamOptions opts{.width = width, .max_new = 5, .end_token = kEos, .num_return = 3};
      const Tensor prompt = full({B, 1}, static_cast<double>(kBos), kInt64);
      const nn::BeamResult a = nn::beam_search(next, prompt, opts);
      const nn::BeamResult b = nn::beam_search(recompute, prompt, opts);
      CHECK(a.sequences.to_vector<int64_t>() == b.sequences.to_vector<int64_t>());
      CHECK(a.lengths.to_vector<int64_t>() == b.lengths.to_vector<int64_t>());
      CHECK_CLOSE(a.scores, b.scores, 1e-9, 0);
    }
    {  // Vocabulary 4, 3 new tokens at most: as wide as the tree, beam search is exhaustive.
      const int64_t V = 4, S = 3, max_new = 3;
      auto model = model_of(o, V, ++seed);
      const auto [src, valid] = sources(1, S, V, seed);
      double best = -INFINITY;
      std::vector<int64_t> best_tokens;
      std::function<void(std::vector<int64_t>&)> visit = [&, s = src,
                                                          l = valid](std::vector<int64_t>& prefix) {
        const bool ended = !prefix.empty() && prefix.back() == kEos;
        if (ended || std::ssize(prefix) == max_new) {
          const double score = score_of(*model, s, l, 0, prefix);
          if (score > best) {
            best = score;
            best_tokens = prefix;
          }
          return;
        }
        for (int64_t t = 0; t < V; ++t) {
          prefix.push_back(t);
          visit(prefix);
          prefix.pop_back();
        }
      };
      std::vector<int64_t> prefix;
      visit(prefix);
      nn::Seq2SeqNextToken next(*model, src, valid);
      const nn::BeamResult r =
          nn::beam_search(next, full({1, 1}, static_cast<double>(kBos), kInt64),
                          {.width = 32, .max_new = max_new, .end_token = kEos});
      const auto length = r.lengths.select(0, 0).select(0, 0).item<int64_t>();
      CHECK(new_tokens(r.sequences.select(0, 0).select(0, 0), length) == best_tokens);
      CHECK(std::abs(r.scores.select(0, 0).select(0, 0).item<double>() - best) < 1e-9);
    }
  }
}

TEST_CASE("Seq2SeqNextToken: bad input names the module and the shapes", "[nn]") {
  auto model = model_of({}, 7, 1);
  const auto [src, valid] = sources(2, 4, 7, 1);
  CHECK_THROWS_WITH(nn::Seq2SeqNextToken(*model, src.to(kFloat32), valid),
                    Contains("Seq2SeqEncoder") && Contains("float32"));
  nn::Seq2SeqNextToken next(*model, src, valid);
  CHECK_THROWS_WITH(next.logits(tokens({1, 1, 1}, {3, 1})),
                    Contains("AttentionDecoder") && Contains("(3, 1)") && Contains("(2, 4, 6)"));
  CHECK_THROWS_AS(next.reorder(tokens({0, 2}, {2})), IndexError);
  // A prompt token outside the target vocabulary is refused before the model runs.
  CHECK_THROWS_AS(nn::greedy(next, tokens({1, 9}, {2, 1}), 3, kEos), IndexError);
  // reset() returns to the encoded state: the same greedy decoding twice.
  const Tensor prompt = full({2, 1}, static_cast<double>(kBos), kInt64);
  CHECK(nn::greedy(next, prompt, 5).to_vector<int64_t>() ==
        nn::greedy(next, prompt, 5).to_vector<int64_t>());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
