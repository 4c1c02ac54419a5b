// transformer_langid, the main example: a Transformer encoder (post-norm, as in the paper and
// d2l) reads the bytes of a fortune cookie and names its language, out of 8, from Debian's
// fortunes packages (see data/langid.h for how the corpus is built and split).
//
//   bytes -> Embedding * sqrt(d) + sinusoidal positions -> N x TransformerEncoderLayer
//         -> mean over the real (non-pad) tokens -> Linear -> 8 logits
//
// Prints a progress bar, per-epoch test accuracy and loss, a confusion matrix; writes
// metrics.csv, loss.png (train and test loss), confusion.png (each also as .svg) and a checkpoint
// (resume with --resume). Ends with a RESULT line.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "examples/common/bf16.h"
#include "examples/common/cli.h"
#include "examples/common/int8_eval.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "examples/transformer_langid/langid_model.h"
#include "nabla/data/dataloader.h"
#include "nabla/data/langid.h"
#include "nabla/data/tokenizer.h"
#include "nabla/nabla.h"
#include "nabla/nn/long_input.h"

using namespace nabla;
using examples::LangIdBatch;
using examples::LangIdData;
using examples::LangIdEvaluation;
using examples::LangIdModel;

namespace {

// The model's and the data's flags are examples::LangIdSize (langid_model.h, shared with
// examples/prune_langid).
struct Config : examples::LangIdSize {
  int epochs = 6;
  int64_t batch_size = 64;
  double lr = 2e-3, weight_decay = 0.01;
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/transformer_langid";
  bool resume = false, smoke = false;
  bool int8 = false;  // also evaluate with int8 Linear layers (nn::quantize_dynamic)
  bool bf16 = false;  // forward passes under bf16 autocast (core/autocast.h)
  std::string long_input = "truncate";  // final evaluation of texts over max_len (nn/long_input.h)
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli(
      "Transformer encoder language identification on Debian's fortunes (8 languages)");
  cli.option("--epochs", c.epochs, "training epochs")
      .option("--batch-size", c.batch_size, "examples per batch")
      .option("--d-model", c.d_model, "model width")
      .option("--heads", c.heads, "attention heads")
      .option("--layers", c.layers, "encoder layers")
      .option("--ffn", c.ffn, "feed-forward width")
      .option("--max-len", c.max_len, "bytes kept per text")
      .option("--ngram-buckets", c.ngram_buckets,
              "hash buckets of the byte bigram/trigram embeddings (0: bytes only)")
      .option("--dropout", c.dropout, "dropout")
      .option("--lr", c.lr, "peak learning rate (AdamW)")
      .option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay")
      .flag("--checkpoint-layers", c.checkpoint_layers,
            "gradient checkpointing: recompute the encoder layers in backward (less memory)")
      .flag("--int8", c.int8, "after training, evaluate in float32 and with int8 Linear layers")
      .flag("--bf16", c.bf16, "forward passes under bf16 autocast (oneDNN; master weights float32)")
      .choice("--long-input", c.long_input, {"truncate", "windows"},
              "final evaluation of texts over --max-len: first max_len bytes, or overlapping "
              "windows with combined log-probabilities")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a few steps on a small slice (for tests)");
  return cli.parse(argc, argv);
}

// Test accuracy with every text read whole: windows of max_len bytes (half overlap) whose
// log-probabilities are combined (nn/long_input.h); texts within max_len are read as before.
double windows_accuracy(LangIdModel& model, const LangIdData& d, const Config& c) {
  NoGradGuard no_grad;
  model.eval();
  const data::ByteTokenizer tok;
  const int64_t hash_buckets = std::max<int64_t>(c.ngram_buckets, 2);
  int64_t correct = 0;
  for (const auto& ex : d.corpus.test) {
    const Tensor log_probs = nn::classify_long_input(
        tok.encode(ex.text), {nn::LongInputMode::Windows, static_cast<size_t>(c.max_len), 0},
        [&](const std::vector<std::vector<int64_t>>& windows) {
          std::vector<std::vector<int64_t>> bigrams, trigrams;
          for (const auto& w : windows) {
            bigrams.push_back(examples::ngram_ids(w, 2, hash_buckets));
            trigrams.push_back(examples::ngram_ids(w, 3, hash_buckets));
          }
          const data::PaddedBatch p = data::pad_sequences(windows, data::SpecialTokens::kPad);
          return model.forward(p.tokens, data::pad_sequences(bigrams, 0).tokens,
                               data::pad_sequences(trigrams, 0).tokens, p.key_padding_mask);
        });
    correct += argmax(log_probs, 0).item<int64_t>() == ex.label ? 1 : 0;
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(d.corpus.test.size());
}

// <out>/model.json: what nabla-serve needs beside the checkpoint's tensors (which give the
// widths and layer count) to rebuild the model.
void write_model_json(const Config& c, const std::vector<std::string>& languages) {
  std::ofstream(c.out + "/model.json") << fmt::format(
      "{{\"model\": \"transformer_langid\", \"heads\": {}, \"max_len\": {}, "
      "\"languages\": [\"{}\"]}}\n",
      c.heads, c.max_len, fmt::join(languages, "\", \""));
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  c.bf16 = examples::use_bf16(c.bf16);
  if (c.threads > 0) set_num_threads(c.threads);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data ---------------------------------------------------------------------------------
  const data::ByteTokenizer tok;
  if (c.smoke) c.epochs = std::min(c.epochs, 2);
  const LangIdData d = examples::load_langid_data(c, c.smoke, tok);
  const auto n_classes = static_cast<int64_t>(d.corpus.languages.size());
  fmt::print("transformer_langid: {} train / {} test texts, {} languages ({}), {}\n",
             d.corpus.train.size(), d.corpus.test.size(), n_classes,
             fmt::join(d.corpus.languages, " "), runtime_info());
  write_model_json(c, d.corpus.languages);
  const auto buckets = examples::length_buckets(d.train, c.batch_size, c.seed);
  data::DataLoader<LangIdBatch>::Options lopts;
  lopts.batch_size = 1;  // one "item" = one pre-built length bucket
  lopts.seed = c.seed;
  data::DataLoader<LangIdBatch> loader(
      static_cast<int64_t>(buckets.size()), lopts, [&](const std::vector<int64_t>& bucket_ids) {
        return examples::make_batch(d.train, d.corpus.train,
                                    buckets[static_cast<size_t>(bucket_ids[0])]);
      });

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  LangIdModel model(c, tok.vocab_size(), n_classes);
  optim::AdamW opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  fmt::print("model: {} parameters, {} steps ({} per epoch)\n", model.num_parameters(), total_steps,
             steps_per_epoch);

  // --- training -------------------------------------------------------------------------------
  examples::TrainingRun training(
      {.out = c.out,
       .resume = c.resume,
       .stop_after = c.stop_after,
       .steps_per_epoch = steps_per_epoch,
       .total_steps = total_steps,
       .metrics = {{"test_accuracy", "test accuracy"}, {"test_loss", "test loss", true}},
       .log_lr = true,
       .start = t0},
      model, opt, sched.get(), loader);
  // The test split, under autocast with --bf16 (the int8 comparison stays float32).
  auto evaluate = [&](bool bf16) {
    autocast::Scope autocast_scope(bf16);
    return examples::evaluate_langid(model, d);
  };
  model.train();
  while (auto batch = training.next_batch(loader)) {
    Tensor loss;
    {
      autocast::Scope autocast_scope(c.bf16);  // forward and loss; backward outside, as PyTorch's
      Tensor logits = model.forward(batch->padded.tokens, batch->bigrams, batch->trigrams,
                                    batch->padded.key_padding_mask);
      loss = cross_entropy(logits, batch->labels);
    }
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    if (training.step_done(loss.item(), batch->labels.numel())) {
      const LangIdEvaluation e = evaluate(c.bf16);
      training.end_epoch({e.confusion.accuracy(), e.loss});
    }
  }
  if (training.stopped()) return 0;
  const double train_s = training.seconds();

  // --- report ---------------------------------------------------------------------------------
  const examples::ConfusionMatrix confusion = evaluate(c.bf16).confusion;
  const double test_acc = confusion.accuracy();
  confusion.print();
  training.losses().plot(c.out + "/loss.png", "transformer_langid: loss", "cross-entropy");
  confusion.save_heatmap(c.out + "/confusion.png");
  fmt::print(
      "test accuracy {:.4f} after {} steps in {:.1f} s; wrote {}/metrics.csv, loss.png, "
      "confusion.png\n",
      test_acc, training.step(), train_s, c.out);
  std::string long_input_fields;
  if (c.long_input == "windows")
    long_input_fields = fmt::format(" test_accuracy_windows={:.4f}", windows_accuracy(model, d, c));
  const std::string int8_fields =
      c.int8 ? examples::compare_int8(model, [&] { return evaluate(false).confusion.accuracy(); })
             : "";
  fmt::print(
      "RESULT example=transformer_langid test_accuracy={:.4f} steps={} params={} "
      "train_s={:.1f}{}{}{}\n",
      test_acc, training.step(), model.num_parameters(), train_s, long_input_fields, int8_fields,
      examples::bf16_field(c.bf16));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
