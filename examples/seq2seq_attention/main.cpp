// seq2seq_attention: a GRU encoder-decoder with Bahdanau (additive) attention (nn/seq2seq.h, d2l
// 10.4) learns character-level transduction:
//
//   --task dates  "tuesday, march 5 1996" / "5/3/96" / "march 5, 1996" / ... -> "1996-03-05"
//                 (synthetic, drawn from a seeded Generator; the default, runs in a minute)
//   --task g2p    grapheme to phoneme on the CMU Pronouncing Dictionary (Debian's festlex-cmu):
//                 "abbreviate" -> "ax b r iy v iy ey t" (stress marks dropped)
//
//   chars -> Embedding -> GRU encoder -> (S, B, H)
//   <bos> y1 y2 ... -> Embedding ++ AdditiveAttention(context) -> GRU decoder -> Linear -> logits
//
// The model variants the literature compares (nn/seq2seq.h):
//   --rnn lstm         LSTM cells in encoder and decoder instead of GRU
//   --bidirectional    Bahdanau et al.'s encoder: forward and backward states as annotations (2H)
//   --attention none   no attention: the final encoder state is one fixed context vector fed at
//                      every decoder step (Cho et al. 2014, Sutskever et al. 2014)
//
// Teacher forcing with cross-entropy (padding ignored), Adam, gradient clipping at 1.0; greedy
// decoding after every epoch, greedy and beam search (--beam, width 4, through
// nn::Seq2SeqNextToken) at the end (exact-match word accuracy, and phoneme error rate for g2p).
// Writes metrics.csv, loss.png, attention_<i>.png heatmaps for three test examples and a
// checkpoint (resume with --resume; --eval-only scores a run's checkpoint without training).
// Ends with a RESULT line naming the variant.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "examples/seq2seq_attention/decoding.h"
#include "examples/seq2seq_attention/tasks.h"
#include "nabla/data/dataloader.h"
#include "nabla/data/tokenizer.h"
#include "nabla/nabla.h"
#include "nabla/nn/seq2seq.h"

using namespace nabla;
using data::SpecialTokens;
using namespace nabla::examples::seq2seq;

namespace {

struct Config {
  std::string task = "dates";
  std::string cmu_dir;  // empty: festlex-cmu's install path, else where get-cmudict.sh unpacks
  int64_t embed = 32, hidden = 128, layers = 1;
  std::string rnn = "gru", attention = "bahdanau";
  bool bidirectional = false;
  double dropout = 0.1;
  int epochs = 0;  // 0: the task's default
  int64_t batch_size = 64;
  int64_t train_size = 0, test_size = 0;  // 0: the task's default (dates) or all (g2p)
  int64_t eval_size = 500;                // test examples decoded after every epoch
  int64_t beam = 4;                       // the final evaluation's beam width (1: greedy only)
  double lr = 5e-3;                       // peak of a warm-up + cosine schedule
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/seq2seq_attention";
  bool resume = false, smoke = false, eval_only = false;
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli(
      "GRU encoder-decoder with Bahdanau attention: dates -> ISO, or grapheme -> phoneme");
  cli.choice("--task", c.task, {"dates", "g2p"}, "dates (synthetic) or g2p (CMU dictionary)")
      .option("--cmu-dir", c.cmu_dir,
              "directory holding cmudict-0.4.out (g2p; default: festlex-cmu's, or where "
              "scripts/get-cmudict.sh unpacks it)")
      .option("--epochs", c.epochs, "training epochs (0: dates 6, g2p 10)")
      .option("--batch-size", c.batch_size, "examples per batch")
      .option("--embed", c.embed, "embedding size")
      .option("--hidden", c.hidden, "RNN hidden size (per direction)")
      .option("--layers", c.layers, "RNN layers")
      .choice("--rnn", c.rnn, {"gru", "lstm"}, "the encoder's and decoder's cell: gru or lstm")
      .flag("--bidirectional", c.bidirectional,
            "bidirectional encoder (Bahdanau et al. 2015): forward and backward states as the "
            "annotations, the decoder started from the backward state through a tanh layer")
      .choice("--attention", c.attention, {"bahdanau", "none"},
              "bahdanau (additive attention over the encoder states) or none (the final encoder "
              "state as a fixed context at every step, Cho et al. 2014)")
      .option("--dropout", c.dropout, "dropout")
      .option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay")
      .option("--lr", c.lr, "peak learning rate (Adam)")
      .option("--train-size", c.train_size, "training examples (0: dates 20000, g2p all)")
      .option("--test-size", c.test_size, "test examples (0: dates 1000, g2p all)")
      .option("--eval-size", c.eval_size, "test examples decoded after each epoch")
      .option("--beam", c.beam, "beam width of the final evaluation (1: greedy only)")
      .flag("--eval-only", c.eval_only,
            "no training: load <out>/checkpoint.safetensors (a run with these flags) and "
            "evaluate it, greedy and with --beam")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a few steps on a few hundred examples (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  // The task's defaults, and --smoke's small run.
  if (c.epochs <= 0) c.epochs = c.task == "g2p" ? 10 : 6;
  if (c.smoke) {
    c.train_size = 256;
    c.test_size = 32;
    c.eval_size = 32;
    c.epochs = 2;
    c.hidden = std::min<int64_t>(c.hidden, 32);
    c.embed = std::min<int64_t>(c.embed, 16);
  }
  if (c.beam < 1)
    throw ValueError(fmt::format("seq2seq_attention: --beam must be >= 1, got {}", c.beam));
  if (c.eval_only && c.resume)
    throw ValueError("seq2seq_attention: --eval-only trains nothing, so --resume has no meaning");
  if (c.cmu_dir.empty()) c.cmu_dir = default_cmu_dir();
  return std::nullopt;
}

// The model variant the flags ask for.
nn::Seq2SeqOptions model_options(const Config& c) {
  return {.num_layers = c.layers,
          .dropout = c.dropout,
          .rnn = c.rnn == "lstm" ? nn::Seq2SeqRNN::kLSTM : nn::Seq2SeqRNN::kGRU,
          .bidirectional = c.bidirectional,
          .attention = c.attention == "none" ? nn::Seq2SeqAttention::kNone
                                             : nn::Seq2SeqAttention::kBahdanau};
}

// --resume from a checkpoint of another variant: an error naming the flag, not a list of shapes.
void check_checkpoint_variant(const Config& c, const nn::EncoderDecoder& model) {
  const std::string path = c.out + "/checkpoint.safetensors";
  if (c.resume && std::filesystem::exists(path))
    model.check_variant(io::Checkpoint::load(path).section("model"));
}

Seq2SeqData load_data(const Config& c) {
  Dataset ds = c.task == "g2p" ? load_cmu(c.cmu_dir, c.train_size, c.test_size)
                               : make_dates(c.train_size > 0 ? c.train_size : 20000,
                                            c.test_size > 0 ? c.test_size : 1000, c.seed);
  std::vector<std::string> sources;
  for (const auto& p : ds.train) sources.push_back(p.src);
  Seq2SeqData d{ds, data::CharTokenizer::build(sources), SymbolVocab(ds.train), {}, {}, 0};
  auto encode = [&](const std::vector<Pair>& v) {
    Encoded e;
    for (const auto& p : v) {
      e.src.push_back(d.src_tok.encode(p.src, false, true));  // chars <eos>
      e.tgt.push_back(d.tgt_vocab.encode(p.tgt));
    }
    return e;
  };
  d.train = encode(d.pairs.train);
  d.test = encode(d.pairs.test);
  for (const auto& t : d.train.tgt) d.max_tgt = std::max(d.max_tgt, t.size());
  return d;
}

// --eval-only: the run's checkpoint into `model`, refused (naming the flags) when another
// variant wrote it. Returns the step it was saved at.
int64_t load_for_evaluation(const Config& c, nn::EncoderDecoder& model, int64_t total_steps) {
  const std::string path = c.out + "/checkpoint.safetensors";
  if (!std::filesystem::exists(path))
    throw IOError(fmt::format(
        "seq2seq_attention: --eval-only needs {}, which a training run with --out {} writes", path,
        c.out));
  const io::Checkpoint ck = io::Checkpoint::load(path);
  const nn::StateDict state = ck.section("model");
  model.check_variant(state);
  model.load_state_dict(state);
  const int64_t step = ck.get_int("step");
  fmt::print("evaluating {} (step {}{})\n", path, step,
             step < total_steps ? fmt::format(" of {}: an unfinished run", total_steps) : "");
  return step;
}

// This process's training: its time (with the per-epoch evaluations), the evaluations' share,
// the epochs it ran and the source + target tokens it trained on. None with --eval-only.
struct Timing {
  bool trained = false;
  double train_s = 0, eval_s = 0, epochs = 0;
  int64_t tokens = 0;
};

// The whole test set decoded greedily and with beam search (--beam > 1), PER by length (g2p;
// per_by_length.csv from the greedy decoding, as transformer_g2p's), the attention maps, and
// the RESULT line, which names the variant and uses transformer_g2p's keys.
void report(nn::EncoderDecoder& model, const Seq2SeqData& d, const Config& c, int64_t steps,
            const Timing& t) {
  const bool g2p = c.task == "g2p";
  const Scores greedy = evaluate(model, d, 0);
  std::optional<Scores> beam;
  if (c.beam > 1) beam = evaluate(model, d, 0, c.beam);
  save_attention(model, d, g2p, c.out);
  if (g2p) {
    fmt::print("PER by source length (greedy):\n");
    greedy.detail.print_by_length();
    if (beam) {
      fmt::print("PER by source length (beam {}):\n", c.beam);
      beam->detail.print_by_length();
    }
    greedy.detail.write_length_csv(c.out + "/per_by_length.csv", "seq2seq_attention");
    examples::plot_per_by_length(c.out + "/per_by_length.png", {c.out + "/per_by_length.csv"});
  }
  auto scores = [&](const Scores& s) {
    return fmt::format("word accuracy {:.4f}{}", s.word_accuracy,
                       g2p ? fmt::format(", PER {:.4f}", s.per) : std::string());
  };
  auto keys = [&](const Scores& s, const char* prefix) {
    return (g2p ? fmt::format(" {}per={:.4f}", prefix, s.per) : std::string()) +
           fmt::format(" {}word_accuracy={:.4f}", prefix, s.word_accuracy);
  };
  const double tokens_per_s = static_cast<double>(t.tokens) / std::max(1e-9, t.train_s - t.eval_s);
  const std::string timing =
      t.trained ? fmt::format("{:.1f} s per epoch ({:.0f} training tokens/s, source + target); ",
                              t.train_s / std::max(1e-9, t.epochs), tokens_per_s)
                : std::string();
  const nn::Seq2SeqOptions v = model.variant();
  std::vector<std::string> files;
  if (t.trained) files = {"metrics.csv", "loss.png"};
  if (g2p) files.push_back("per_by_length.csv, .png");
  if (v.attention == nn::Seq2SeqAttention::kBahdanau) files.push_back("attention_0..2.png");
  fmt::print("{} ({}): {} parameters, {} steps; {}test {} (greedy){}; wrote in {}: {}\n", c.task,
             nn::seq2seq_flags(v), model.num_parameters(), steps, timing, scores(greedy),
             beam ? fmt::format("; beam {}: {}", c.beam, scores(*beam)) : "", c.out,
             fmt::join(files, ", "));
  fmt::print(
      "RESULT example=seq2seq_attention task={} rnn={} attention={} bidirectional={}{}{} steps={} "
      "params={}{}\n",
      c.task, v.rnn == nn::Seq2SeqRNN::kLSTM ? "lstm" : "gru",
      v.attention == nn::Seq2SeqAttention::kNone ? "none" : "bahdanau", v.bidirectional ? 1 : 0,
      keys(greedy, ""), beam ? keys(*beam, "beam_") : "", steps, model.num_parameters(),
      t.trained ? fmt::format(" tokens_per_s={:.0f} train_s={:.1f}", tokens_per_s, t.train_s)
                : std::string(" eval_only=1"));
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  if (c.threads > 0) set_num_threads(c.threads);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();
  const bool g2p = c.task == "g2p";

  // --- data ---------------------------------------------------------------------------------
  const Seq2SeqData d = load_data(c);
  fmt::print(
      "seq2seq_attention ({}): {} train / {} test pairs, {} source / {} target symbols, {}\n",
      c.task, d.pairs.train.size(), d.pairs.test.size(), d.src_tok.vocab_size(), d.tgt_vocab.size(),
      runtime_info());
  for (size_t i = 0; i < 3 && i < d.pairs.train.size(); ++i)
    fmt::print("  e.g. \"{}\" -> \"{}\"\n", d.pairs.train[i].src,
               fmt::join(d.pairs.train[i].tgt, g2p ? " " : ""));
  // Batches of equal-length sources (examples/common/g2p_data.h).
  const auto loader_ptr = examples::pair_loader(d.train.src, d.train.tgt, c.batch_size, c.seed);
  data::DataLoader<examples::PairBatch>& loader = *loader_ptr;

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  const nn::Seq2SeqOptions rnn = model_options(c);
  auto encoder =
      std::make_shared<nn::Seq2SeqEncoder>(d.src_tok.vocab_size(), c.embed, c.hidden, rnn);
  auto decoder = std::make_shared<nn::AttentionDecoder>(d.tgt_vocab.size(), c.embed, c.hidden, rnn);
  nn::EncoderDecoder model(encoder, decoder);
  optim::Adam opt(model.parameters(), {.lr = c.lr});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  fmt::print("model ({}): {} parameters, {} steps ({} per epoch)\n", nn::seq2seq_flags(rnn),
             model.num_parameters(), total_steps, steps_per_epoch);
  check_checkpoint_variant(c, model);
  if (c.eval_only) {
    report(model, d, c, load_for_evaluation(c, model, total_steps), {});
    return 0;
  }

  // --- training -------------------------------------------------------------------------------
  std::vector<examples::TrainingRun::Metric> metrics = {{"word_accuracy", "word accuracy"}};
  if (g2p) metrics.push_back({"per", "PER"});
  examples::TrainingRun training({.out = c.out,
                                  .resume = c.resume,
                                  .stop_after = c.stop_after,
                                  .steps_per_epoch = steps_per_epoch,
                                  .total_steps = total_steps,
                                  .metrics = metrics,
                                  .unit = "target tokens",
                                  .start = t0},
                                 model, opt, sched.get(), loader);
  const int64_t first_step = training.step();
  int64_t tokens = 0;
  double eval_s = 0;
  model.train();
  while (auto batch = training.next_batch(loader)) {
    Tensor logits = model.forward(batch->src.tokens, batch->tgt_in, batch->src.valid_lens);
    const int64_t V = logits.size(-1);
    Tensor loss = cross_entropy(logits.reshape({-1, V}), batch->tgt_out.reshape({-1}),
                                {.ignore_index = SpecialTokens::kPad});
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    tokens += batch->source_tokens + batch->target_tokens;
    if (training.step_done(loss.item(), batch->target_tokens)) {
      const auto e0 = std::chrono::steady_clock::now();
      const Scores s = evaluate(model, d, c.eval_size);
      eval_s += examples::seconds_since(e0);
      training.end_epoch(g2p ? std::vector{s.word_accuracy, s.per} : std::vector{s.word_accuracy});
    }
  }
  if (training.stopped()) return 0;
  const double train_s = training.seconds();
  const double epochs_here =
      static_cast<double>(training.step() - first_step) / static_cast<double>(steps_per_epoch);

  // --- report ---------------------------------------------------------------------------------
  training.losses().plot(c.out + "/loss.png", "seq2seq_attention: training loss",
                         "cross-entropy per token");
  report(model, d, c, training.step(),
         {.trained = true,
          .train_s = train_s,
          .eval_s = eval_s,
          .epochs = epochs_here,
          .tokens = tokens});
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
