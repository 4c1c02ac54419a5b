// char_gpt's model (examples/char_gpt/model.h): PyTorch parity of the forward and every gradient,
// the tied embedding's gradient, cached generation against recomputation (greedy and beam
// search), and bad input.
#include <set>
#include <string>
#include <vector>

#include "examples/char_gpt/model.h"
#include "tests/parity.h"

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

char_gpt::ModelConfig tiny(double dropout = 0.0) {
  return {.vocab = 7,
          .context = 6,
          .d_model = 8,
          .heads = 2,
          .layers = 2,
          .ffn = 12,
          .dropout = dropout};
}

// Weights far from GPT-2's small initialisation, so the logits are far apart: a greedy argmax
// then does not hinge on float32 rounding (the cached and recomputed paths sum in other orders).
void randomize(nn::Module& m, uint64_t seed, double stddev) {
  Generator gen(seed);
  for (auto& [name, p] : m.named_parameters()) nn::init::normal_(p, 0.0, stddev, gen);
}

Tensor next_char_loss(char_gpt::Model& m, const Tensor& tokens, const Tensor& targets) {
  const Tensor logits = m.forward(tokens);
  return cross_entropy(logits.reshape({-1, m.config().vocab}), targets.reshape({-1}));
}

}  // namespace

TEST_CASE("char_gpt model: forward and every gradient match PyTorch (float64)", "[char_gpt]") {
  const io::SafetensorsFile& f = test::fixture("char_gpt");
  char_gpt::Model m(tiny());
  m.to(kFloat64);
  nn::StateDict params;
  for (const auto& [name, t] : f.tensors)
    if (name.rfind("param.", 0) == 0) params.emplace_back(name.substr(6), t);
  // Same names as the PyTorch twin: load_state_dict is strict (no missing or extra key).
  REQUIRE(params.size() == m.named_parameters().size());
  m.load_state_dict(params);

  const Tensor tokens = f.at("tokens"), targets = f.at("targets");
  CHECK_CLOSE(m.forward(tokens), f.at("logits"), 1e-10, 1e-10);
  Tensor loss = next_char_loss(m, tokens, targets);
  CHECK_CLOSE(loss.reshape({1}), f.at("loss"), 1e-12, 1e-12);
  loss.backward();
  for (const auto& [name, p] : m.named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    CHECK_CLOSE(p.grad(), f.at("grad." + name), 1e-10, 1e-10);
  }
}

TEST_CASE("char_gpt model: the output projection is the token embedding", "[char_gpt]") {
  const char_gpt::ModelConfig c = tiny();
  char_gpt::Model m(c);
  m.to(kFloat64);
  randomize(m, 3, 0.5);
  // One (vocab, d_model) parameter in all: wte.weight. The parameter count is PyTorch's for the
  // same model (no lm_head copy).
  int64_t vocab_by_d = 0;
  for (const auto& [name, p] : m.named_parameters())
    if (p.shape() == Shape{c.vocab, c.d_model}) {
      ++vocab_by_d;
      CHECK(name == "wte.weight");
    }
  CHECK(vocab_by_d == 1);
  const int64_t d = c.d_model, L = c.layers;
  CHECK(m.num_parameters() == c.vocab * d + c.context * d +
                                  L * (4 * d * d + 4 * d + 2 * d * c.ffn + c.ffn + d + 4 * d) +
                                  2 * d);

  // Ids 0..3 appear in the input (embedding + projection contributions), 4..6 only as outputs.
  const Tensor tokens = from_vector<int64_t>({0, 1, 2, 3, 1, 2, 0, 0, 3, 1}, {2, 5});
  const Tensor targets = from_vector<int64_t>({4, 5, 6, 0, 1, 2, 3, 4, 5, 6}, {2, 5});
  Tensor w = m.token_embedding()->weight();
  next_char_loss(m, tokens, targets).backward();
  const Tensor grad = w.grad().clone();

  // The projection alone (the embedding lookup's use detached): an input id's gradient must
  // differ from it, i.e. both uses contribute.
  m.zero_grad();
  {
    const Tensor h = m.hidden(tokens, nullptr).detach();
    const Tensor logits = linear(h, w);
    cross_entropy(logits.reshape({-1, c.vocab}), targets.reshape({-1})).backward();
  }
  const Tensor projection_only = w.grad().clone();
  CHECK(test::close_excess(grad.select(0, 1), projection_only.select(0, 1), 1e-6, 0) > 0);

  // Central differences on entries of input ids and of output-only ids.
  const double eps = 1e-6;
  for (const auto& [row, col] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 5}, {3, 2}, {5, 1}, {6, 7}}) {
    INFO("wte.weight[" << row << ", " << col << "]");
    auto loss_at = [&](double delta) {
      NoGradGuard no_grad;
      Tensor entry = w.select(0, row).select(0, col);
      const double old = entry.item<double>();
      entry.fill_(old + delta);
      const double l = next_char_loss(m, tokens, targets).item<double>();
      entry.fill_(old);
      return l;
    };
    const double numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
    CHECK(std::abs(grad.select(0, row).select(0, col).item<double>() - numeric) < 1e-7);
  }
}

namespace {

// A float32 model with a longer context, in eval mode, for the generation tests.
struct GenerationSetup {
  char_gpt::Model model{{.vocab = 11,
                         .context = 64,
                         .d_model = 16,
                         .heads = 2,
                         .layers = 2,
                         .ffn = 32,
                         .dropout = 0.1}};
  Tensor prompt;
  GenerationSetup() {
    randomize(model, 7, 0.3);
    model.eval();
    Generator gen(8);
    prompt = randint(0, 11, {2, 5}, gen);
  }
};

}  // namespace

TEST_CASE("char_gpt model: greedy through the KV cache equals greedy by recomputation",
          "[char_gpt]") {
  GenerationSetup s;
  char_gpt::CachedGenerator cached(s.model);
  nn::RecomputeNextToken recompute([&](const Tensor& t) { return s.model.forward(t); },
                                   s.model.config().vocab);
  const Tensor a = nn::greedy(cached, s.prompt, 40);
  const Tensor b = nn::greedy(recompute, s.prompt, 40);
  REQUIRE(a.shape() == Shape{2, 45});
  CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
  CHECK(cached.cache().length() == 44);  // the last token is returned, never fed
  // Not a constant stream: the comparison above covers varied tokens.
  const std::vector<int64_t> ids = a.to_vector<int64_t>();
  CHECK(std::set<int64_t>(ids.begin() + 5, ids.end()).size() >= 3);

  // The logits at every step, fed the same sequence.
  NoGradGuard no_grad;
  cached.reset();
  recompute.reset();
  // (CHECK_CLOSE evaluates its arguments more than once: each logits call feeds the model.)
  const Tensor first_cached = cached.logits(s.prompt),
               first_recomputed = recompute.logits(s.prompt);
  CHECK_CLOSE(first_cached, first_recomputed, 1e-6, 1e-6);
  for (int64_t j = 5; j < 44; ++j) {
    INFO("position " << j);
    const Tensor next = a.narrow(1, j, 1).contiguous();
    const Tensor step_cached = cached.logits(next), step_recomputed = recompute.logits(next);
    CHECK_CLOSE(step_cached, step_recomputed, 1e-6, 1e-6);
  }
}

TEST_CASE("char_gpt model: beam search (width 3) through the cache reorders it", "[char_gpt]") {
  GenerationSetup s;
  char_gpt::CachedGenerator cached(s.model);
  nn::RecomputeNextToken recompute([&](const Tensor& t) { return s.model.forward(t); },
                                   s.model.config().vocab);
  const nn::BeamOptions o{.width = 3, .max_new = 20, .num_return = 3};
  const nn::BeamResult a = nn::beam_search(cached, s.prompt, o);
  const nn::BeamResult b = nn::beam_search(recompute, s.prompt, o);
  CHECK(a.sequences.to_vector<int64_t>() == b.sequences.to_vector<int64_t>());
  CHECK_CLOSE(a.scores, b.scores, 1e-5, 1e-5);
  CHECK(cached.cache().self_attn.front().batch_size() == 6);  // 2 prompts x 3 beams
}

TEST_CASE("char_gpt model: bad input gives clear errors", "[char_gpt]") {
  char_gpt::Model m(tiny());
  m.eval();
  NoGradGuard no_grad;
  CHECK_THROWS_WITH(m.forward(zeros({1, 7}, kInt64)),
                    Contains("7 tokens per row exceed the model's context of 6 positions"));
  CHECK_THROWS_AS(m.forward(from_vector<int64_t>({1, 7, 2}, {1, 3})), IndexError);
  CHECK_THROWS_WITH(m.forward(from_vector<int64_t>({1, 2, 3, 4, -1, 0}, {2, 3})),
                    Contains("token id -1 at row 1, position 1 is outside the vocabulary of 7"));
  CHECK_THROWS_WITH(m.forward(zeros({2, 3})), Contains("tokens must be int64 (batch, length)"));
  CHECK_THROWS_AS(m.forward(zeros({3}, kInt64)), ShapeError);

  // A cache used past the context: the model itself, and the generator before the model runs.
  nn::TransformerCache cache(m.config().context);
  m.forward(zeros({1, 4}, kInt64), cache);
  CHECK_THROWS_WITH(m.forward(zeros({1, 3}, kInt64), cache),
                    Contains("3 new tokens after the 4 cached positions exceed the model's "
                             "context of 6"));
  char_gpt::CachedGenerator gen(m);
  CHECK_THROWS_WITH(nn::greedy(gen, zeros({1, 4}, kInt64), 5),
                    Contains("char_gpt::CachedGenerator: 1 new tokens after the 6 cached "
                             "positions exceed the cache's 6 positions"));
  // Up to the context is fine: 4 prompt tokens + 3 new (the last one is never fed).
  CHECK(nn::greedy(gen, zeros({1, 4}, kInt64), 3).size(1) == 7);
  CHECK_THROWS_WITH(nn::greedy(gen, from_vector<int64_t>({0, 9}, {1, 2}), 1),
                    Contains("prompt token 9 at row 0, position 1 is outside"));
}
