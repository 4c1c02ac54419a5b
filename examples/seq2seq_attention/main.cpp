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
// decoding for evaluation (exact-match word accuracy, and phoneme error rate for g2p). Writes
// metrics.csv, loss.png, attention_<i>.png heatmaps for three test examples and a checkpoint
// (resume with --resume). Ends with a RESULT line.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
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
  double lr = 5e-3;                       // peak of a warm-up + cosine schedule
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/seq2seq_attention";
  bool resume = false, smoke = false;
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

struct Batch {
  data::PaddedBatch src;
  Tensor tgt_in, tgt_out;  // (B, T): <bos> y..., and y... <eos>, padded with PAD
  int64_t tokens = 0;
};

struct Encoded {
  std::vector<std::vector<int64_t>> src, tgt;
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

// The pairs, the source characters' and target symbols' vocabularies, and each pair encoded.
struct Seq2SeqData {
  Dataset pairs;
  data::CharTokenizer src_tok;
  SymbolVocab tgt_vocab;
  Encoded train, test;
  size_t max_tgt = 0;  // the longest training target
};

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

// Training pairs `idx`, padded: the source, the decoder's input and its target.
Batch make_batch(const Encoded& train, const std::vector<int64_t>& idx) {
  std::vector<std::vector<int64_t>> s, tin, tout;
  Batch b;
  for (int64_t i : idx) {
    s.push_back(train.src[static_cast<size_t>(i)]);
    const auto& y = train.tgt[static_cast<size_t>(i)];
    tin.push_back({SpecialTokens::kBos});
    tin.back().insert(tin.back().end(), y.begin(), y.end());
    tout.push_back(y);
    tout.back().push_back(SpecialTokens::kEos);
    b.tokens += static_cast<int64_t>(tout.back().size());
  }
  b.src = data::pad_sequences(s, SpecialTokens::kPad);
  b.tgt_in = data::pad_sequences(tin, SpecialTokens::kPad).tokens;
  b.tgt_out = data::pad_sequences(tout, SpecialTokens::kPad).tokens;
  return b;
}

// Greedy decoding of test pair i.
nn::EncoderDecoder::Decoded decode(nn::EncoderDecoder& model, const Seq2SeqData& d, size_t i) {
  const auto& s = d.test.src[i];
  return model.greedy_decode(from_vector(s, {static_cast<int64_t>(s.size())}),
                             static_cast<int64_t>(s.size()), SpecialTokens::kBos,
                             SpecialTokens::kEos, static_cast<int64_t>(d.max_tgt) + 5);
}

struct Scores {
  double word_accuracy = 0, per = 0;  // exact matches; phoneme (symbol) error rate
  examples::G2pScores detail;         // the same, and by source length
};

// On `limit` test pairs spread evenly over the test set (0: all of it). Not the first ones: the
// CMU test split is in dictionary order, and its first 500 words (acronyms, names in "aa...")
// score 0.44 where the whole set scores 0.63.
Scores evaluate(nn::EncoderDecoder& model, const Seq2SeqData& d, int64_t limit) {
  const size_t total = d.test.src.size();
  const size_t stride =
      limit > 0 ? std::max<size_t>(1, total / static_cast<size_t>(limit)) : size_t{1};
  examples::G2pScores s;
  for (size_t i = 0; i < total && (limit <= 0 || s.total().words < limit); i += stride)
    s.add(d.test.src[i].size() - 1, decode(model, d, i).tokens, d.test.tgt[i]);  // - 1: <eos>
  return Scores{s.word_accuracy(), s.per(), s};
}

// Three test pairs decoded, printed and their attention (decoder steps x source characters)
// saved as <out>/attention_<k>.png (no heatmap with --attention none).
void save_attention(nn::EncoderDecoder& model, const Seq2SeqData& d, bool g2p,
                    const std::string& out) {
  for (size_t k = 0; k < 3 && k < d.test.src.size(); ++k) {
    const size_t i = k * d.test.src.size() / 3;
    const auto decoded = decode(model, d, i);
    const bool attends = decoded.attention.defined();  // not with --attention none
    const auto steps = attends ? static_cast<size_t>(decoded.attention.size(0)) : size_t{0},
               cols = attends ? static_cast<size_t>(decoded.attention.size(1)) : size_t{0};
    std::vector<std::string> row_labels, col_labels = data::utf8_chars(d.pairs.test[i].src);
    col_labels.push_back("<eos>");
    for (size_t r = 0; r < steps; ++r)
      row_labels.push_back(r < decoded.tokens.size() ? d.tgt_vocab.name(decoded.tokens[r])
                                                     : "<eos>");
    std::vector<std::string> pred;
    for (int64_t t : decoded.tokens) pred.push_back(d.tgt_vocab.name(t));
    const std::string sep = g2p ? " " : "";
    fmt::print("  \"{}\" -> \"{}\" (reference \"{}\")\n", d.pairs.test[i].src, fmt::join(pred, sep),
               fmt::join(d.pairs.test[i].tgt, sep));
    if (!attends) continue;
    viz::heatmap(
        fmt::format("{}/attention_{}.png", out, k),
        viz::matrix_rows(decoded.attention.contiguous().to_vector<float>(), steps, cols),
        {.title = fmt::format("attention: {} \u2192 {}", d.pairs.test[i].src, fmt::join(pred, sep)),
         .xlabel = "source",
         .ylabel = "output",
         .row_labels = row_labels,
         .col_labels = col_labels});
  }
}

// PER by source length, the bins of transformer_g2p (examples/common/g2p_data.h): printed, and
// <out>/per_by_length.csv and .png.
void report_by_length(const Scores& scores, const std::string& out) {
  fmt::print("PER by source length:\n");
  scores.detail.print_by_length();
  scores.detail.write_length_csv(out + "/per_by_length.csv", "seq2seq_attention");
  examples::plot_per_by_length(out + "/per_by_length.png", {out + "/per_by_length.csv"});
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
  // Batches of equal-length sources: the encoder's final state, the decoder's first, then never
  // runs over padding, as when one word is decoded alone.
  std::vector<size_t> src_lengths;
  for (const auto& s : d.train.src) src_lengths.push_back(s.size());
  const auto buckets = examples::length_buckets(src_lengths, c.batch_size, c.seed);
  data::DataLoader<Batch>::Options lopts;
  lopts.batch_size = 1;  // one "item" = one pre-built length bucket
  lopts.seed = c.seed;
  data::DataLoader<Batch> loader(
      static_cast<int64_t>(buckets.size()), lopts, [&](const std::vector<int64_t>& bucket_ids) {
        return make_batch(d.train, buckets[static_cast<size_t>(bucket_ids[0])]);
      });

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
    if (training.step_done(loss.item(), batch->tokens)) {
      const Scores s = evaluate(model, d, c.eval_size);
      training.end_epoch(g2p ? std::vector{s.word_accuracy, s.per} : std::vector{s.word_accuracy});
    }
  }
  if (training.stopped()) return 0;
  const double train_s = training.seconds();

  // --- report ---------------------------------------------------------------------------------
  const Scores final_scores = evaluate(model, d, 0);
  save_attention(model, d, g2p, c.out);
  if (g2p) report_by_length(final_scores, c.out);
  training.losses().plot(c.out + "/loss.png", "seq2seq_attention: training loss",
                         "cross-entropy per token");
  fmt::print(
      "test word accuracy {:.4f}{} after {} steps in {:.1f} s; wrote {}/metrics.csv, "
      "loss.png{}\n",
      final_scores.word_accuracy,
      g2p ? fmt::format(", phoneme error rate {:.4f}", final_scores.per) : std::string(),
      training.step(), train_s, c.out, c.attention == "none" ? "" : ", attention_0..2.png");
  fmt::print(
      "RESULT example=seq2seq_attention task={} word_accuracy={:.4f}{} steps={} params={} "
      "train_s={:.1f}\n",
      c.task, final_scores.word_accuracy,
      g2p ? fmt::format(" per={:.4f}", final_scores.per) : std::string(), training.step(),
      model.num_parameters(), train_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
