// transformer_langid, the main example: a Transformer encoder (post-norm, as in the paper and
// d2l) reads the bytes of a fortune cookie and names its language, out of 8, from Debian's
// fortunes packages (see data/langid.h for how the corpus is built and split).
//
//   bytes -> Embedding * sqrt(d) + sinusoidal positions -> N x TransformerEncoderLayer
//         -> mean over the real (non-pad) tokens -> Linear -> 8 logits
//
// Prints a progress bar, per-epoch test accuracy and loss, a confusion matrix; writes
// metrics.csv, loss.png (train and test loss), confusion.png (each also as .svg) and a checkpoint
// (resume with --resume). Ends with a RESULT line. Under `mpirun -np N` the N processes train
// data-parallel (examples/common/data_parallel.h): each takes 1/N of every length bucket of
// --global-batch texts, so the steps are one process's with that batch.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "examples/common/bf16.h"
#include "examples/common/cli.h"
#include "examples/common/data_parallel.h"
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
  int64_t global_batch = 0;  // examples per step over all processes; 0: batch_size
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
      .option("--global-batch", c.global_batch,
              "examples per step over all processes under mpirun, each taking 1/N (default: "
              "--batch-size)")
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
  const std::optional<int> exit_code = cli.parse(argc, argv);
  if (c.global_batch > 0) c.batch_size = c.global_batch;
  return exit_code;
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

// The run's first lines and model.json (rank 0 only).
void print_header(const Config& c, const LangIdData& d, const examples::DataParallel& dp) {
  if (!dp.writer()) return;
  fmt::print("transformer_langid: {} train / {} test texts, {} languages ({}), {}\n",
             d.corpus.train.size(), d.corpus.test.size(), d.corpus.languages.size(),
             fmt::join(d.corpus.languages, " "), runtime_info());
  if (dp.world_size() > 1)
    fmt::print("data-parallel: {} processes, {} texts each per step\n", dp.world_size(),
               dp.per_rank_batch(c.batch_size));
  write_model_json(c, d.corpus.languages);
}

// This process's share of one length bucket, with the factor on its mean loss
// (DataParallel::share) and the bucket's size.
struct ShareBatch {
  LangIdBatch batch;
  double loss_factor;
  int64_t global_examples;
};

// Length buckets of the global batch, drawn in the same order on every rank (one seed); each
// rank trains on its share of each.
std::unique_ptr<data::DataLoader<ShareBatch>> share_loader(const Config& c, const LangIdData& d,
                                                           const examples::DataParallel& dp) {
  dp.per_rank_batch(c.batch_size);  // checks that the processes divide it
  data::DataLoader<ShareBatch>::Options lopts;
  lopts.batch_size = 1;  // one "item" = one pre-built length bucket
  lopts.seed = c.seed;
  auto buckets = examples::length_buckets(d.train, c.batch_size, c.seed);
  const auto n = static_cast<int64_t>(buckets.size());
  return std::make_unique<data::DataLoader<ShareBatch>>(
      n, lopts, [&d, &dp, buckets = std::move(buckets)](const std::vector<int64_t>& bucket_ids) {
        const auto& bucket = buckets[static_cast<size_t>(bucket_ids[0])];
        const examples::DataParallel::Share share = dp.share(bucket);
        return ShareBatch{examples::make_batch(d.train, d.corpus.train, share.ids),
                          share.loss_factor, static_cast<int64_t>(bucket.size())};
      });
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  examples::DataParallel dp;
  c.bf16 = examples::use_bf16(c.bf16);
  if (c.threads > 0) set_num_threads(c.threads);
  examples::reuse_blocks_across_lengths();  // batches of varying length (length_buckets)
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data ---------------------------------------------------------------------------------
  const data::ByteTokenizer tok;
  if (c.smoke) c.epochs = std::min(c.epochs, 2);
  const LangIdData d = examples::load_langid_data(c, c.smoke, tok);
  const auto n_classes = static_cast<int64_t>(d.corpus.languages.size());
  const auto loader_ptr = share_loader(c, d, dp);
  print_header(c, d, dp);
  data::DataLoader<ShareBatch>& loader = *loader_ptr;

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  const auto model_ptr = std::make_shared<LangIdModel>(c, tok.vocab_size(), n_classes);
  LangIdModel& model = *model_ptr;
  dp.wrap(model_ptr);
  optim::AdamW opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  if (dp.writer())
    fmt::print("model: {} parameters, {} steps ({} per epoch)\n", model.num_parameters(),
               total_steps, steps_per_epoch);

  // --- training -------------------------------------------------------------------------------
  examples::TrainingRun training(
      {.out = c.out,
       .resume = c.resume,
       .stop_after = c.stop_after,
       .steps_per_epoch = steps_per_epoch,
       .total_steps = total_steps,
       .metrics = {{"test_accuracy", "test accuracy"}, {"test_loss", "test loss", true}},
       .log_lr = true,
       .writer = dp.writer(),
       .start = t0},
      model, opt, sched.get(), loader);
  dp.own_random_stream();
  // The test split, under autocast with --bf16 (the int8 comparison stays float32).
  auto evaluate = [&](bool bf16) {
    autocast::Scope autocast_scope(bf16);
    return examples::evaluate_langid(model, d);
  };
  model.train();
  while (auto share = training.next_batch(loader)) {
    const LangIdBatch& batch = share->batch;
    Tensor loss;
    {
      autocast::Scope autocast_scope(c.bf16);  // forward and loss; backward outside, as PyTorch's
      Tensor logits = model.forward(batch.padded.tokens, batch.bigrams, batch.trigrams,
                                    batch.padded.key_padding_mask);
      loss = cross_entropy(logits, batch.labels);
      if (share->loss_factor != 1) loss = mul(loss, share->loss_factor);
    }
    opt.zero_grad();
    dp.backward(loss);  // loss.backward(); under mpirun, then the gradients' mean over processes
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    if (training.step_done(dp.mean(loss.item()), share->global_examples)) {
      // Rank 0 evaluates; the others go on to the next step and wait for it there.
      const LangIdEvaluation e =
          dp.writer() ? evaluate(c.bf16) : LangIdEvaluation{examples::ConfusionMatrix({})};
      training.end_epoch({e.confusion.accuracy(), e.loss});
    }
  }
  if (training.stopped() || !dp.writer()) return 0;
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
      "train_s={:.1f}{}{}{}{}\n",
      test_acc, training.step(), model.num_parameters(), train_s, long_input_fields, int8_fields,
      examples::bf16_field(c.bf16), examples::world_size_field(dp));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::distributed_main(argc, argv, run); }
