// char_gpt: a character-level GPT (decoder-only Transformer: pre-norm, GELU, learned positions,
// tied input/output embedding; examples/char_gpt/model.h) trained on the King James Bible from
// Debian's bible-kjv package, with an n-gram model of the same split as the yardstick.
//
//   random windows of `context` characters -> Model -> next-character cross-entropy
//   AdamW, linear warm-up then cosine decay, gradient clipping at 1
//
// At each evaluation (every --eval-every steps) it prints the validation nats/char on a fixed
// subset of the validation windows (evaluate.h) and a sample from --prompt (--temperature,
// --top-p), saves the checkpoint and a metrics.csv row; at the end it scores the whole
// validation text and writes loss.png/.svg (train and validation) and samples.txt. Training
// stops at --steps or when the --minutes budget runs out, whichever comes first. --generate
// loads the checkpoint and only writes text. Ends with a RESULT line.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "examples/char_gpt/corpus.h"
#include "examples/char_gpt/evaluate.h"
#include "examples/char_gpt/model.h"
#include "examples/char_gpt/ngram.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "nabla/core/io/checkpoint.h"
#include "nabla/data/dataloader.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Config {
  // The default is sized for the 20-minute budget on 2 cores: one step (32 x 128 characters,
  // 1.78M parameters) costs about 3 x (2 x 1.78M + 4 layers x 4 x 128 x 192) FLOP per character,
  // 48.6 GFLOP, so 1800 steps take ~18 min at 80 GFLOP/s (the machine's useful training rate
  // when quiet is 60-120). Smaller models (d_model 128) get more steps but learn less per step.
  int64_t context = 128, d_model = 192, heads = 6, layers = 4, ffn = 768;
  double dropout = 0.0;  // one pass over the text at most: nothing to regularise yet
  // Optimisation.
  int64_t batch_size = 32, steps = 1800, warmup = 200;
  double lr = 2e-3, weight_decay = 0.1, minutes = 20;
  // Evaluation and samples.
  int64_t eval_every = 200, eval_windows = 192, sample_chars = 300;
  std::string prompt = "And God said";
  double temperature = 0.8, top_p = 0.95;
  // --generate: write this many characters from --prompt with the saved model.
  bool generate = false;
  int64_t generate_chars = 500;
  uint64_t seed = 42;
  std::string out = "runs/char_gpt";
  bool resume = false, smoke = false;
  int64_t stop_after = 0;
  int threads = 0;
};

// --smoke: a tiny run of seconds. These are its defaults; flags given with it still apply.
void smoke_defaults(Config& c) {
  c.context = 32;
  c.d_model = 32;
  c.heads = 2;
  c.layers = 2;
  c.ffn = 64;
  c.batch_size = 8;
  c.steps = 40;
  c.warmup = 10;
  c.eval_every = 20;
  c.eval_windows = 16;
  c.sample_chars = 60;
  c.generate_chars = 100;
}

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--smoke") smoke_defaults(c);
  examples::CommandLine cli(
      "Character GPT on the King James Bible (Debian's bible-kjv), with an n-gram yardstick");
  cli.option("--context", c.context, "characters per window (learned positions)")
      .option("--d-model", c.d_model, "token width")
      .option("--heads", c.heads, "attention heads")
      .option("--layers", c.layers, "Transformer blocks")
      .option("--ffn", c.ffn, "feed-forward width")
      .option("--dropout", c.dropout, "dropout inside the blocks")
      .option("--batch-size", c.batch_size, "windows per step")
      .option("--steps", c.steps, "optimizer steps (the cosine schedule's length)")
      .option("--warmup", c.warmup, "linear warm-up steps")
      .option("--lr", c.lr, "peak learning rate (AdamW)")
      .option("--weight-decay", c.weight_decay, "AdamW weight decay")
      .option("--minutes", c.minutes, "time budget: training stops when it is spent (0: none)")
      .option("--eval-every", c.eval_every, "steps between evaluations (samples, checkpoint)")
      .option("--eval-windows", c.eval_windows,
              "validation windows scored at each evaluation (0: all; the final score uses all)")
      .option("--prompt", c.prompt, "text the samples start from")
      .option("--temperature", c.temperature, "sampling temperature (> 0)")
      .option("--top-p", c.top_p, "nucleus sampling threshold, in (0, 1]")
      .option("--sample-chars", c.sample_chars, "characters per sample at each evaluation")
      .flag("--generate", c.generate,
            "no training: load <out>/checkpoint.safetensors and write --generate-chars characters")
      .option("--generate-chars", c.generate_chars, "characters --generate writes")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a tiny model for 40 steps, evaluated on 4096 validation characters (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  if (!(c.temperature > 0))
    throw ValueError(fmt::format("char_gpt: --temperature must be > 0, got {}", c.temperature));
  if (!(c.top_p > 0 && c.top_p <= 1))
    throw ValueError(fmt::format("char_gpt: --top-p must be in (0, 1], got {}", c.top_p));
  if (c.context < 2 || c.steps < 1 || c.eval_every < 1 || c.batch_size < 1 || c.sample_chars < 0 ||
      c.generate_chars < 0 || c.minutes < 0)
    throw ValueError(
        "char_gpt: --context >= 2, --steps, --eval-every, --batch-size >= 1, --sample-chars, "
        "--generate-chars, --minutes >= 0");
  return std::nullopt;
}

char_gpt::ModelConfig model_config(const Config& c, int64_t vocab) {
  char_gpt::ModelConfig mc;
  mc.vocab = vocab;
  mc.context = c.context;
  mc.d_model = c.d_model;
  mc.heads = c.heads;
  mc.layers = c.layers;
  mc.ffn = c.ffn;
  mc.dropout = c.dropout;
  return mc;
}

std::string describe(const char_gpt::ModelConfig& m) {
  return fmt::format("context {}, d_model {}, heads {}, layers {}, ffn {}", m.context, m.d_model,
                     m.heads, m.layers, m.ffn);
}

// Training windows: item i is the window starting at character i, its targets one further.
struct Batch {
  Tensor tokens, targets;  // (B, T), (B * T)
};

// <out>/model_config.txt: the shape flags of the run that writes <out>'s checkpoint. Shapes in
// the checkpoint catch most mismatches, but not --heads (same tensors, another split of them).
std::vector<std::pair<std::string, int64_t>> shape_flags(const char_gpt::ModelConfig& m) {
  return {{"vocab", m.vocab}, {"context", m.context}, {"d-model", m.d_model},
          {"heads", m.heads}, {"layers", m.layers},   {"ffn", m.ffn}};
}

void save_model_config(const std::string& out, const char_gpt::ModelConfig& m) {
  std::ofstream file(out + "/model_config.txt");
  for (const auto& [name, value] : shape_flags(m)) file << name << ' ' << value << '\n';
  if (!file) throw IOError("char_gpt: cannot write " + out + "/model_config.txt");
}

void check_model_config(const std::string& out, const char_gpt::ModelConfig& m) {
  std::ifstream file(out + "/model_config.txt");
  std::string name, differences;
  int64_t saved = 0;
  for (const auto& [flag, value] : shape_flags(m)) {
    if (!(file >> name >> saved) || name != flag) return;  // an older or foreign file: shapes only
    if (saved != value)
      differences += fmt::format("{}--{} {} (these flags: {})", differences.empty() ? "" : ", ",
                                 flag, saved, value);
  }
  if (!differences.empty())
    throw ValueError(fmt::format(
        "char_gpt --generate: the checkpoint in {} was trained with another configuration: {}; "
        "pass the flags it was trained with",
        out, differences));
}

int generate_only(const Config& c, const char_gpt::Vocabulary& vocab) {
  const char_gpt::ModelConfig mc = model_config(c, vocab.size());
  char_gpt::Model model(mc);
  const std::string path = c.out + "/checkpoint.safetensors";
  if (!std::filesystem::exists(path))
    throw Error(
        fmt::format("char_gpt --generate: no checkpoint at {}; train first (the same "
                    "--out and model flags, without --generate)",
                    path));
  check_model_config(c.out, mc);
  const io::Checkpoint ck = io::Checkpoint::load(path);
  try {
    model.load_state_dict(ck.section("model"));
  } catch (const ValueError& e) {
    throw ValueError(fmt::format(
        "char_gpt --generate: {} was saved by a model of another configuration than these flags "
        "({}); pass the flags it was trained with. {}",
        path, describe(mc), e.what()));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string text = char_gpt::generate_text(model, vocab, c.prompt, c.generate_chars,
                                                   {c.temperature, c.top_p, c.seed});
  const double seconds = examples::seconds_since(t0);
  fmt::print("{}\n", text);
  fmt::print(stderr, "char_gpt: {} characters in {:.2f} s ({:.0f} chars/s), step {} of {}\n",
             c.generate_chars, seconds, static_cast<double>(c.generate_chars) / seconds,
             ck.get_int("step"), path);
  return 0;
}

struct Data {
  char_gpt::Vocabulary vocab;
  std::vector<int64_t> train, valid;
  double ngram5 = 0, ngram7 = 0;  // the yardstick on the same split, nats/char
};

// The corpus, its ids, and the n-gram models' validation scores.
Data load_data(const Config& c, const char_gpt::Corpus& corpus) {
  Data d{char_gpt::Vocabulary(corpus.train), {}, {}};
  d.train = d.vocab.encode(corpus.train, "the training text");
  d.valid = d.vocab.encode(corpus.validation, "the validation text");
  if (c.smoke) d.valid.resize(4096);
  fmt::print(
      "char_gpt: {} chapters; train {} characters, validation {} ({} chapters{}), {} distinct; "
      "{}\n",
      corpus.chapters, d.train.size(), d.valid.size(), corpus.validation_chapters,
      c.smoke ? ", cut for --smoke" : "", d.vocab.size(), runtime_info());
  for (const int order : {5, 7}) {
    char_gpt::NgramModel ngram(order, 0.75, d.vocab.size());
    ngram.train(d.train);
    (order == 5 ? d.ngram5 : d.ngram7) = ngram.nats_per_char(d.valid);
    fmt::print("{}-gram (interpolated absolute discounting, D = 0.75): {:.4f} nats/char\n", order,
               order == 5 ? d.ngram5 : d.ngram7);
  }
  return d;
}

// Item i of an epoch is the window of `context` characters starting at character i.
data::DataLoader<Batch>::MakeBatch window_batches(const std::vector<int64_t>& text,
                                                  int64_t context) {
  return [&text, context](const std::vector<int64_t>& starts) {
    std::vector<int64_t> x, y;
    for (const int64_t s : starts) {
      x.insert(x.end(), text.begin() + s, text.begin() + s + context);
      y.insert(y.end(), text.begin() + s + 1, text.begin() + s + context + 1);
    }
    const auto rows = static_cast<int64_t>(starts.size());
    return Batch{from_vector(x, {rows, context}), from_vector(y, {rows * context})};
  };
}

// The whole validation text scored, a final sample timed, the figure, the RESULT line.
void report(const Config& c, const Data& d, char_gpt::Model& model,
            const char_gpt::ValidationSet& validation, const examples::TrainingRun& training,
            std::ofstream& samples) {
  const double train_s = training.seconds();
  const double val = validation.nats_per_char(model, validation.windows(), c.batch_size);
  const auto g0 = std::chrono::steady_clock::now();
  const std::string text = char_gpt::generate_text(model, d.vocab, c.prompt, c.generate_chars,
                                                   {c.temperature, c.top_p, c.seed});
  const double gen_chars_per_s =
      static_cast<double>(c.generate_chars) / examples::seconds_since(g0);
  fmt::print("--- final sample ---\n{}\n---\n", text);
  samples << fmt::format("--- final, step {} ---\n{}\n", training.step(), text);
  training.losses().plot(c.out + "/loss.png", "char_gpt: King James Bible", "nats/char");
  fmt::print(
      "validation {:.4f} nats/char over all {} characters (7-gram {:.4f}, 5-gram {:.4f}) after "
      "{} steps in {:.1f} s; wrote {}/metrics.csv, samples.txt and loss (.png, .svg)\n",
      val, validation.characters(), d.ngram7, d.ngram5, training.step(), train_s, c.out);
  fmt::print(
      "RESULT example=char_gpt val_nats_per_char={:.4f} ngram7_nats_per_char={:.4f} "
      "train_s={:.1f} gen_chars_per_s={:.1f}\n",
      val, d.ngram7, train_s, gen_chars_per_s);
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  if (c.threads > 0) set_num_threads(c.threads);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data and the yardstick -----------------------------------------------------------------
  const char_gpt::Corpus corpus = char_gpt::load_kjv();
  if (c.generate) return generate_only(c, char_gpt::Vocabulary(corpus.train));
  char_gpt::Vocabulary(corpus.train).encode(c.prompt, "--prompt");  // fail now, not after training
  std::filesystem::create_directories(c.out);
  const Data d = load_data(c, corpus);
  const char_gpt::ValidationSet validation(d.valid, d.vocab.encode("\n", "newline")[0], c.context);
  const auto eval_windows = validation.windows(c.eval_windows);
  data::DataLoader<Batch> loader(static_cast<int64_t>(d.train.size()) - c.context,
                                 {.batch_size = c.batch_size, .drop_last = true, .seed = c.seed},
                                 window_batches(d.train, c.context));

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  char_gpt::Model model(model_config(c, d.vocab.size()));
  optim::AdamW opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup, c.steps);
  save_model_config(c.out, model.config());
  fmt::print("model: {}, {} parameters; {} steps of {} windows, eval every {}\n",
             describe(model.config()), model.num_parameters(), c.steps, c.batch_size, c.eval_every);

  // --- training -------------------------------------------------------------------------------
  examples::TrainingRun training({.out = c.out,
                                  .resume = c.resume,
                                  .stop_after = c.stop_after,
                                  .steps_per_epoch = c.eval_every,
                                  .total_steps = c.steps,
                                  .metrics = {{"val_nats_per_char", "validation nats/char", true}},
                                  .log_lr = true,
                                  .unit = "chars",
                                  .start = t0},
                                 model, opt, sched.get(), loader);
  std::ofstream samples(c.out + "/samples.txt", c.resume ? std::ios::app : std::ios::trunc);
  const auto evaluate_and_sample = [&] {
    const double val = validation.nats_per_char(model, eval_windows, c.batch_size);
    const std::string text = char_gpt::generate_text(
        model, d.vocab, c.prompt, c.sample_chars,
        {c.temperature, c.top_p, c.seed + static_cast<uint64_t>(training.step())});
    fmt::print("--- sample at step {} (temperature {}, top-p {}) ---\n{}\n---\n", training.step(),
               c.temperature, c.top_p, text);
    samples << fmt::format("--- step {} ---\n{}\n", training.step(), text) << std::flush;
    training.end_epoch({val});
  };
  bool out_of_time = false;
  model.train();
  while (auto batch = training.next_batch(loader)) {
    Tensor logits = model.forward(batch->tokens);
    Tensor loss = cross_entropy(logits.reshape({-1, d.vocab.size()}), batch->targets);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    if (training.step_done(loss.item(), batch->targets.numel())) {
      evaluate_and_sample();
    } else if (c.minutes > 0 && training.seconds() > c.minutes * 60) {
      fmt::print("\ntime budget of {} minutes spent at step {} of {}\n", c.minutes, training.step(),
                 c.steps);
      evaluate_and_sample();
      out_of_time = true;
      break;
    }
  }
  if (training.stopped() && !out_of_time) return 0;
  report(c, d, model, validation, training, samples);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
