// gpt: char_gpt's model (examples/char_gpt/model.h), the same model as bench/py/gpt.py.
//   tokens (B, T) -> wte + wpe -> dropout -> L pre-norm GELU causal TransformerEncoderLayer
//   -> ln_f -> linear(., wte.weight) (tied); defaults d 256, 8 heads, FFN 1024, 4 layers.
// --mode train: one training step (zero_grad, forward, cross-entropy over every position,
// backward, AdamW) at --batch x --seq (default 32 x 256), context 256.
// --mode generate: 500 characters (--new) after a 256-character prompt (--prompt-len), batch 1,
// greedy, eval mode: --cache on feeds the model through its KV cache (char_gpt::CachedGenerator,
// one position per step); --cache off recomputes the whole prefix at every step
// (nn::RecomputeNextToken). The model's context is 1024 there (--context), so prompt + new
// tokens fit without sliding the window. Prints ops=<new tokens> (run.py: us per character).
// Vocabulary 65 (about char_gpt's 63 characters; the speed does not depend on it).
#include <fmt/format.h>

#include "bench/common.h"
#include "examples/char_gpt/model.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: char_gpt's model, one training step or 500 generated characters"};
  bench::Options opt;
  std::string mode = "train", cache = "on";
  int64_t batch = 32, seq = 256, context = 0, prompt_len = 256, new_tokens = 500;
  bench::add_common_options(app, opt);
  app.add_option("--mode", mode, "train | generate")->check(CLI::IsMember({"train", "generate"}));
  app.add_option("--batch", batch, "training batch");
  app.add_option("--seq", seq, "training sequence length");
  app.add_option("--context", context, "model positions; 0: 256 (train), 1024 (generate)");
  app.add_option("--prompt-len", prompt_len, "generate: prompt length");
  app.add_option("--new", new_tokens, "generate: new characters");
  app.add_option("--cache", cache, "generate: on | off")->check(CLI::IsMember({"on", "off"}));
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  constexpr int64_t kVocab = 65;
  char_gpt::ModelConfig config{.vocab = kVocab};
  config.context = context > 0 ? context : (mode == "train" ? 256 : 1024);
  manual_seed(0);
  char_gpt::Model model(config);
  Generator gen(1);
  const double base_rss = bench::peak_rss_mb();
  const bench::Fields params{{"params", std::to_string(model.num_parameters())}};

  if (mode == "train") {
    const Tensor tokens = randint(0, kVocab, {batch, seq + 1}, gen);
    const Tensor x = tokens.narrow(1, 0, seq).contiguous();
    const Tensor y = tokens.narrow(1, 1, seq).contiguous();
    optim::AdamW adamw(model.parameters(), {.lr = 3e-4});
    model.train();
    const bench::Timing t = bench::time_it(opt, [&] {
      adamw.zero_grad();
      Tensor loss = cross_entropy(model.forward(x).reshape({-1, kVocab}), y.reshape({-1}));
      loss.backward();
      adamw.step();
    });
    bench::report(t, base_rss, params);
    return 0;
  }

  const Tensor prompt = randint(0, kVocab, {1, prompt_len}, gen);
  model.eval();
  char_gpt::CachedGenerator cached(model);
  nn::RecomputeNextToken recompute([&](const Tensor& t) { return model.forward(t); }, kVocab);
  nn::NextToken& next = cache == "on" ? static_cast<nn::NextToken&>(cached) : recompute;
  const bench::Timing t = bench::time_it(opt, [&] { nn::greedy(next, prompt, new_tokens); });
  bench::Fields extra = params;
  extra.emplace_back("ops", std::to_string(new_tokens));
  bench::report(t, base_rss, extra);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_gpt: {}\n", e.what());
  return 1;
}
