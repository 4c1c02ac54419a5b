// encoder: a Transformer-encoder classifier, timed per step, the same model as bench/py/encoder.py.
//   tokens (B, T) -> Embedding(vocab, d) + sinusoidal positions (dropout) -> L post-norm
//   TransformerEncoderLayer (batch_first, ReLU) -> mean over the sequence -> Linear(d, 10)
// --mode train: one training step, zero_grad + forward + cross_entropy + backward + AdamW step.
// --mode infer: model.eval() and a forward under NoGradGuard (the torch twin may take its fused
// inference fast path there, which is fine: it is what a torch user gets).
// --config small: B 32, T 64, d 128, 4 heads, FFN 512, 2 layers; large: B 16, T 256, d 256,
// 8 heads, FFN 1024, 4 layers. Both: vocab 1000, dropout 0.1, 10 classes.
// Inputs (token ids, labels) are fixed and seeded, made once outside the timed step.
// --bf16: forward and loss under autocast::Scope (bf16 products, core/autocast.h); the twin runs
// them under torch.autocast("cpu", dtype=torch.bfloat16). Backward and the step stay outside.
// --mode activations: no timing; one training-mode forward + loss, and activation_mb= the
// allocator's live bytes the graph holds when the forward is done (what backward will read).
//
// flop (reported): per layer forward 8*N*d^2 (QKV + out projections) + 4*N*d*F (FFN)
// + 4*B*T^2*d (scores Q K^T and weights @ V), N = B*T tokens; a training step counts 3x the
// forward. Embedding, head and elementwise work are ignored. Also prints params=<count>.
#include <fmt/format.h>

#include "bench/common.h"
#include "bench/encoder_model.h"
#include "nabla/core/autocast.h"
#include "nabla/nabla.h"

using namespace nabla;
using bench::Config;
using bench::config_named;
using bench::EncoderClassifier;

namespace {

// The forward flop count stated at the top of the file.
double forward_flop(const Config& c) {
  const double B = static_cast<double>(c.batch), T = static_cast<double>(c.seq);
  const double d = static_cast<double>(c.d_model), F = static_cast<double>(c.ffn);
  const double N = B * T;
  const double per_layer = 8 * N * d * d + 4 * N * d * F + 4 * B * T * T * d;
  return per_layer * static_cast<double>(c.layers);
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"nabla: Transformer-encoder classifier, one training step or one inference"};
  bench::Options opt;
  std::string config = "small", mode = "train";
  bool bf16 = false;
  bench::add_common_options(app, opt);
  app.add_flag("--bf16", bf16, "forward and loss under bf16 autocast");
  app.add_option("--config", config, "small | large")->check(CLI::IsMember({"small", "large"}));
  app.add_option("--mode", mode, "train | infer")
      ->check(CLI::IsMember({"train", "infer", "activations"}));
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const Config c = config_named(config);
  manual_seed(0);
  EncoderClassifier model(c);
  optim::AdamW adamw(model.parameters(), {.lr = 1e-3});
  Generator gen(1);
  const Tensor tokens = randint(0, c.vocab, {c.batch, c.seq}, gen);
  const Tensor labels = randint(0, c.classes, {c.batch}, gen);
  const double base_rss = bench::peak_rss_mb();

  auto forward_loss = [&] {
    autocast::Scope scope(bf16);
    return cross_entropy(model.forward(tokens), labels);
  };
  if (mode == "activations") {
    model.train();
    const size_t before = allocator::live_bytes();
    Tensor loss = forward_loss();
    const double mb = static_cast<double>(allocator::live_bytes() - before) / (1 << 20);
    fmt::print("RESULT bench=encoder_{}.activations bf16={} activation_mb={:.2f}\n", config,
               int{bf16}, mb);
    return 0;
  }
  bench::Timing t;
  double flop = forward_flop(c);
  if (mode == "train") {
    model.train();
    flop *= 3;
    t = bench::time_it(opt, [&] {
      adamw.zero_grad();
      Tensor loss = forward_loss();
      loss.backward();
      adamw.step();
    });
  } else {
    model.eval();
    NoGradGuard no_grad;
    t = bench::time_it(opt, [&] {
      autocast::Scope scope(bf16);
      model.forward(tokens);
    });
  }
  bench::report(t, base_rss,
                {{"flop", fmt::format("{:.0f}", flop)},
                 {"params", std::to_string(model.num_parameters())},
                 {"bf16", std::to_string(int{bf16})}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_encoder: {}\n", e.what());
  return 1;
}
