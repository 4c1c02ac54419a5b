// transformer_g2p: grapheme to phoneme on the CMU Pronouncing Dictionary with an nn::Transformer
// encoder-decoder (model.h), the task of `seq2seq_attention --task g2p` with the same split,
// vocabularies and scores (examples/common/g2p_data.h), so the two models compare directly:
//
//   "abbreviate" -> "ax b r iy v iy ey t" (stress marks dropped)
//
// Teacher forcing with label-smoothed cross-entropy, AdamW, warm-up + cosine; greedy and
// beam-search (width 4) decoding through nn::greedy / nn::beam_search with the decoder's KV cache.
// Writes metrics.csv, loss.png, per.png (test PER and word accuracy per epoch), per_by_length.csv
// and .png (bins 1-4, 5-8, 9-12, 13+ letters), cross_attention_<k>_{head<h>,mean}.png for three
// test words (each figure also .svg) and a checkpoint (resume with --resume). Ends with a RESULT
// line. --ema D evaluates a moving average of the weights instead of the last ones (both scored at
// the end). The training forwards run under bf16 autocast where the CPU has native bf16 (as
// --bf16 forces; --float32 turns it off).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "examples/common/bf16.h"
#include "examples/common/cli.h"
#include "examples/common/g2p_data.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "examples/common/weight_average.h"
#include "examples/transformer_g2p/decoding.h"
#include "examples/transformer_g2p/model.h"
#include "nabla/data/dataloader.h"
#include "nabla/data/tokenizer.h"
#include "nabla/nabla.h"

using namespace nabla;
using data::SpecialTokens;
using namespace nabla::examples::g2p;
using examples::Dataset;
using examples::G2pScores;
using examples::SymbolVocab;

namespace {

struct Config {
  std::string cmu_dir;  // empty: festlex-cmu's install path, else where get-cmudict.sh unpacks
  ModelConfig model;
  double label_smoothing = 0.1;
  // 18 epochs: at 8 the validation PER was still falling ~0.004 per epoch; float32 16 reached
  // PER 0.0811 (greedy) in 1165 s, bf16 18 reached 0.0797 in 1227 s (README, Zen 4). The warm-up
  // is fixed and the cosine decay spans --epochs, so the schedule follows the epoch count.
  int epochs = 18;
  int64_t batch_size = 128;
  int64_t train_size = 0, test_size = 0;  // 0: all
  int64_t eval_size = 1000;               // test words decoded (greedy) after every epoch
  int64_t beam = 4;
  double lr = 1.5e-3, weight_decay = 0.01;  // peak of a warm-up + cosine schedule (AdamW)
  int64_t warmup_steps = 400;
  double ema =
      0;  // decay of the weights' moving average (0: none), examples/common/weight_average.h
  bool bf16 = false;                  // forward passes under bf16 autocast (core/autocast.h)
  bool float32 = false;               // no autocast even where the CPU has native bf16
  std::string label = "Transformer";  // the model's name in per_by_length.csv
  uint64_t seed = 42;
  std::string out = "runs/transformer_g2p";
  bool resume = false, smoke = false;
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli("Transformer encoder-decoder: grapheme -> phoneme (CMU dictionary)");
  cli.option("--cmu-dir", c.cmu_dir,
             "directory holding cmudict-0.4.out (default: festlex-cmu's, or where "
             "scripts/get-cmudict.sh unpacks it)")
      .option("--epochs", c.epochs, "training epochs")
      .option("--batch-size", c.batch_size, "words per batch")
      .option("--d-model", c.model.d_model, "model width")
      .option("--heads", c.model.heads, "attention heads")
      .option("--encoder-layers", c.model.encoder_layers, "encoder layers")
      .option("--decoder-layers", c.model.decoder_layers, "decoder layers")
      .option("--ffn", c.model.ffn, "feed-forward width")
      .option("--dropout", c.model.dropout, "dropout")
      .option("--label-smoothing", c.label_smoothing, "cross-entropy label smoothing")
      .option("--lr", c.lr, "peak learning rate (AdamW)")
      .option("--weight-decay", c.weight_decay, "AdamW weight decay")
      .option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay")
      .option("--ema", c.ema,
              "decay of an exponential moving average of the weights, updated every step and "
              "evaluated instead of them (0: none)")
      .flag("--bf16", c.bf16,
            "forward passes under bf16 autocast (oneDNN; master weights float32); the default "
            "where the CPU has native bf16 (avx512_bf16 or AMX), except with --smoke")
      .flag("--float32", c.float32, "no bf16 autocast, also where the CPU has native bf16")
      .option("--beam", c.beam, "beam width of the final evaluation")
      .option("--train-size", c.train_size, "training words (0: all)")
      .option("--test-size", c.test_size, "test words (0: all)")
      .option("--eval-size", c.eval_size, "test words decoded after each epoch")
      .option("--label", c.label, "the model's name in per_by_length.csv")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "two short epochs of a tiny model on a few hundred words (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  if (c.smoke) {
    c.train_size = 256;
    c.test_size = c.eval_size = 32;
    c.epochs = 2;
    c.warmup_steps = 2;
    c.batch_size = std::min<int64_t>(c.batch_size, 32);
    c.model.d_model = std::min<int64_t>(c.model.d_model, 32);
    c.model.heads = std::min<int64_t>(c.model.heads, 2);
    c.model.encoder_layers = c.model.decoder_layers = 1;
    c.model.ffn = std::min<int64_t>(c.model.ffn, 64);
  }
  if (c.model.d_model <= 0 || c.model.heads <= 0 || c.model.d_model % c.model.heads != 0)
    throw ValueError(
        fmt::format("transformer_g2p: --d-model {} must be a positive multiple of "
                    "--heads {}",
                    c.model.d_model, c.model.heads));
  if (!(c.ema >= 0 && c.ema < 1))
    throw ValueError(fmt::format("transformer_g2p: --ema must be in [0, 1), got {}", c.ema));
  if (c.beam < 1)
    throw ValueError(fmt::format("transformer_g2p: --beam must be >= 1, got {}", c.beam));
  if (c.bf16 && c.float32)
    throw ValueError("transformer_g2p: --bf16 and --float32 contradict each other");
  // bf16 trains 0.8x as long per epoch at the same loss where the products are native (README);
  // elsewhere it would only save memory, and --smoke stays float32 to compare across machines.
  if (!c.bf16 && !c.float32 && !c.smoke)
    c.bf16 = onednn::available() && autocast::cpu_has_native_bf16();
  if (c.cmu_dir.empty()) c.cmu_dir = examples::default_cmu_dir();
  return std::nullopt;
}

// The dictionary split, the letters' and phonemes' vocabularies (built from the training words,
// as seq2seq_attention's) and every word encoded.
struct G2pData {
  Dataset pairs;
  data::CharTokenizer letters;
  SymbolVocab phonemes;
  EncodedWords train, test;
  int64_t max_tgt = 0;  // the longest training pronunciation
};

G2pData load_data(const Config& c) {
  Dataset ds = examples::load_cmu(c.cmu_dir, c.train_size, c.test_size);
  std::vector<std::string> sources;
  for (const auto& p : ds.train) sources.push_back(p.src);
  G2pData d{ds, data::CharTokenizer::build(sources), SymbolVocab(ds.train), {}, {}, 0};
  auto encode = [&](const std::vector<examples::Pair>& v) {
    EncodedWords e;
    for (const auto& p : v) {
      e.src.push_back(d.letters.encode(p.src, false, true));  // letters <eos>
      e.tgt.push_back(d.phonemes.encode(p.tgt));
    }
    return e;
  };
  d.train = encode(d.pairs.train);
  d.test = encode(d.pairs.test);
  for (const auto& t : d.train.tgt) d.max_tgt = std::max<int64_t>(d.max_tgt, std::ssize(t));
  return d;
}

// per.png: the per-epoch test PER and word accuracy of metrics.csv (all epochs, resumed ones too).
void plot_epoch_scores(const std::string& out) {
  std::ifstream in(out + "/metrics.csv");
  std::string line;
  std::getline(in, line);
  std::vector<double> steps, per, acc;
  while (std::getline(in, line)) {
    std::vector<double> v;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) v.push_back(std::stod(cell));
    if (v.size() < 5) continue;  // step, epoch, loss, word_accuracy, per
    steps.push_back(v[0]);
    acc.push_back(v[3]);
    per.push_back(v[4]);
  }
  viz::line_plot(out + "/per.png",
                 {{"PER (greedy)", steps, per, viz::kPalette[0], true},
                  {"word accuracy (greedy)", steps, acc, viz::kPalette[1], true}},
                 {.title = "transformer_g2p: test scores per epoch", .xlabel = "step"});
}

// This process's training time (with the per-epoch evaluations), the evaluations' share, the
// epochs it ran and the tokens it trained on.
struct Timing {
  double train_s = 0, eval_s = 0, epochs = 0;
  int64_t tokens = 0;
};

// The whole test set decoded greedily and with beam search, PER by length, the cross-attention
// maps, the curves and the RESULT line.
void report(G2pTransformer& model, examples::WeightAverage* average, const G2pData& d,
            const Config& c, const examples::TrainingRun& training, const Timing& t) {
  const DecodeOptions greedy{.beam = 1, .max_new = d.max_tgt + 5};
  model.eval();
  std::vector<size_t> all(d.test.src.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::string raw_field;  // with --ema: the last weights' greedy scores, for comparison
  if (average) {
    const G2pScores raw = score_words(model, d.test, all, greedy);
    fmt::print("last weights (not averaged): test PER {:.4f}, word accuracy {:.4f} (greedy)\n",
               raw.per(), raw.word_accuracy());
    raw_field =
        fmt::format(" last_per={:.4f} last_word_accuracy={:.4f}", raw.per(), raw.word_accuracy());
    average->swap();  // the averaged weights from here on (the report is the run's end)
    fmt::print("the moving average of the weights (decay {}, {} updates) from here on:\n",
               average->decay(), average->updates());
  }
  const G2pScores g = score_words(model, d.test, all, greedy);
  DecodeOptions beam = greedy;
  beam.beam = c.beam;
  beam.batch = std::max<int64_t>(1, greedy.batch / c.beam);
  const G2pScores b = score_words(model, d.test, all, beam);
  fmt::print("PER by source length (greedy):\n");
  g.print_by_length();
  fmt::print("PER by source length (beam {}):\n", c.beam);
  b.print_by_length();
  g.write_length_csv(c.out + "/per_by_length.csv", c.label);
  examples::plot_per_by_length(c.out + "/per_by_length.png", {c.out + "/per_by_length.csv"});
  for (size_t k = 0; k < 3 && k < d.test.src.size(); ++k) {
    const size_t i = (2 * k + 1) * d.test.src.size() / 6;
    const auto phonemes =
        save_cross_attention(model, d.pairs.test[i].src, d.test.src[i], d.phonemes, greedy.max_new,
                             c.out, fmt::format("cross_attention_{}", k));
    std::vector<std::string> names;
    for (int64_t p : phonemes) names.push_back(d.phonemes.name(p));
    fmt::print("  \"{}\" -> \"{}\" (reference \"{}\")\n", d.pairs.test[i].src,
               fmt::join(names, " "), fmt::join(d.pairs.test[i].tgt, " "));
  }
  training.losses().plot(c.out + "/loss.png", "transformer_g2p: training loss",
                         "cross-entropy per token (label-smoothed)");
  plot_epoch_scores(c.out);
  const double tokens_per_s = static_cast<double>(t.tokens) / std::max(1e-9, t.train_s - t.eval_s);
  fmt::print(
      "{} parameters; {:.1f} s per epoch ({:.0f} training tokens/s, source + target); test PER "
      "{:.4f}, word accuracy {:.4f} (greedy); beam {}: PER {:.4f}, word accuracy {:.4f}; wrote "
      "{}/metrics.csv, per_by_length.csv and (.png, .svg) loss, per, per_by_length, "
      "cross_attention_*\n",
      model.num_parameters(), t.train_s / std::max(1e-9, t.epochs), tokens_per_s, g.per(),
      g.word_accuracy(), c.beam, b.per(), b.word_accuracy(), c.out);
  fmt::print(
      "RESULT example=transformer_g2p per={:.4f} word_accuracy={:.4f} beam_per={:.4f} "
      "beam_word_accuracy={:.4f} steps={} params={} tokens_per_s={:.0f} train_s={:.1f}{}{}\n",
      g.per(), g.word_accuracy(), b.per(), b.word_accuracy(), training.step(),
      model.num_parameters(), tokens_per_s, t.train_s, raw_field, examples::bf16_field(c.bf16));
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  if (c.threads > 0) set_num_threads(c.threads);
  c.bf16 = examples::use_bf16(c.bf16);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data ---------------------------------------------------------------------------------
  const G2pData d = load_data(c);
  fmt::print("transformer_g2p: {} train / {} test words, {} letter / {} phoneme symbols, {}\n",
             d.pairs.train.size(), d.pairs.test.size(), d.letters.vocab_size(), d.phonemes.size(),
             runtime_info());
  const auto loader_ptr = examples::pair_loader(d.train.src, d.train.tgt, c.batch_size, c.seed);
  data::DataLoader<examples::PairBatch>& loader = *loader_ptr;

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  c.model.src_vocab = d.letters.vocab_size();
  c.model.tgt_vocab = d.phonemes.size();
  G2pTransformer model(c.model);
  optim::AdamW opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  fmt::print(
      "model: d_model {}, {} heads, {}+{} layers, ffn {}: {} parameters; {} steps ({} per "
      "epoch)\n",
      c.model.d_model, c.model.heads, c.model.encoder_layers, c.model.decoder_layers, c.model.ffn,
      model.num_parameters(), total_steps, steps_per_epoch);
  if (c.resume) check_checkpoint_config(c.out + "/checkpoint.safetensors", model);
  std::unique_ptr<examples::WeightAverage> average;
  if (c.ema > 0) average = std::make_unique<examples::WeightAverage>(model, c.ema);

  // --- training -------------------------------------------------------------------------------
  const DecodeOptions greedy{.beam = 1, .max_new = d.max_tgt + 5};
  const auto eval_idx = spread_indices(d.test.src.size(), c.eval_size);
  examples::TrainingRun training({.out = c.out,
                                  .resume = c.resume,
                                  .stop_after = c.stop_after,
                                  .steps_per_epoch = steps_per_epoch,
                                  .total_steps = total_steps,
                                  .metrics = {{"word_accuracy", "word accuracy"}, {"per", "PER"}},
                                  .log_lr = false,
                                  .unit = "tokens",
                                  .start = t0,
                                  .average = average.get()},
                                 model, opt, sched.get(), loader);
  const int64_t first_step = training.step();
  int64_t tokens = 0;
  double eval_s = 0;
  model.train();
  while (auto batch = training.next_batch(loader)) {
    Tensor loss;
    {
      autocast::Scope autocast_scope(c.bf16);  // forward and loss; backward outside, as PyTorch's
      Tensor logits = model.forward(batch->src.tokens, batch->src.key_padding_mask, batch->tgt_in);
      loss = cross_entropy(
          logits.reshape({-1, logits.size(-1)}), batch->tgt_out.reshape({-1}),
          {.ignore_index = SpecialTokens::kPad, .label_smoothing = c.label_smoothing});
    }
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    if (average) average->update();
    const int64_t batch_tokens = batch->source_tokens + batch->target_tokens;
    tokens += batch_tokens;
    if (training.step_done(loss.item(), batch_tokens)) {
      const auto e0 = std::chrono::steady_clock::now();
      model.eval();
      if (average) average->swap();  // the weights the run will deliver
      const G2pScores s = score_words(model, d.test, eval_idx, greedy);
      if (average) average->swap();
      model.train();
      eval_s += examples::seconds_since(e0);
      training.end_epoch({s.word_accuracy(), s.per()});
    }
  }
  if (training.stopped()) return 0;
  const double train_s = training.seconds();
  const double epochs_here =
      static_cast<double>(training.step() - first_step) / static_cast<double>(steps_per_epoch);

  // --- report ---------------------------------------------------------------------------------
  report(model, average.get(), d, c, training,
         {.train_s = train_s, .eval_s = eval_s, .epochs = epochs_here, .tokens = tokens});
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
