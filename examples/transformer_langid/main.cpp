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
#include <optional>

#include "examples/common/bf16.h"
#include "examples/common/cli.h"
#include "examples/common/int8_eval.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "nabla/data/dataloader.h"
#include "nabla/data/langid.h"
#include "nabla/data/tokenizer.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Config {
  int64_t d_model = 64, heads = 4, layers = 2, ffn = 256, max_len = 128;
  int64_t ngram_buckets = 8192;  // hashed byte bigram and trigram embeddings; 0 = bytes only
  double dropout = 0.1;
  int epochs = 6;
  int64_t batch_size = 64;
  double lr = 2e-3, weight_decay = 0.01;
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/transformer_langid";
  bool resume = false, smoke = false;
  bool checkpoint_layers = false;  // recompute the encoder layers' activations in backward
  bool int8 = false;               // also evaluate with int8 Linear layers (nn::quantize_dynamic)
  bool bf16 = false;               // forward passes under bf16 autocast (core/autocast.h)
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

// Ids of the hashed byte n-grams ending at each position (fastText-style subword features), in
// [1, buckets); 0, the padding row, where the n-gram would begin before the text.
std::vector<int64_t> ngram_ids(const std::vector<int64_t>& tokens, size_t n, int64_t buckets) {
  std::vector<int64_t> ids(tokens.size(), 0);
  for (size_t t = n - 1; t < tokens.size(); ++t) {
    uint64_t h = 14695981039346656037ULL ^ n;  // FNV-1a over the n token ids
    for (size_t k = t + 1 - n; k <= t; ++k) {
      h ^= static_cast<uint64_t>(tokens[k]);
      h *= 1099511628211ULL;
    }
    ids[t] = 1 + static_cast<int64_t>(h % static_cast<uint64_t>(buckets - 1));
  }
  return ids;
}

// N(0, 1/d) rows, the padding row zero: after the x sqrt(d) scaling the input has unit scale,
// like the positional code (the paper's convention). N(0, 1) x sqrt(d) would drown the positions
// and saturate the first layer's attention.
void init_embedding(const nn::Embedding& e, int64_t d_model, int64_t padding_idx) {
  NoGradGuard no_grad;
  nn::init::normal_(e.weight(), 0.0, 1.0 / std::sqrt(static_cast<double>(d_model)));
  e.weight().select(0, padding_idx).zero_();
}

// The classifier: byte (+ hashed bigram and trigram) embeddings, the encoder stack, a mean-pool
// head. The n-gram embeddings give the encoder the local spelling cues that identify a language
// (a character n-gram Naive Bayes reaches 99.8% on this data) without a longer sequence.
class LangIdModel : public nn::Module {
 public:
  LangIdModel(const Config& c, int64_t vocab, int64_t classes)
      : Module("LangIdModel"), d_model_(c.d_model) {
    embedding_ = register_module(
        "embedding", std::make_shared<nn::Embedding>(vocab, c.d_model, data::SpecialTokens::kPad));
    if (c.ngram_buckets > 0) {
      bigrams_ = register_module("bigram_embedding",
                                 std::make_shared<nn::Embedding>(c.ngram_buckets, c.d_model, 0));
      trigrams_ = register_module("trigram_embedding",
                                  std::make_shared<nn::Embedding>(c.ngram_buckets, c.d_model, 0));
    }
    init_embedding(*embedding_, c.d_model, data::SpecialTokens::kPad);
    if (bigrams_) {
      init_embedding(*bigrams_, c.d_model, 0);
      init_embedding(*trigrams_, c.d_model, 0);
    }
    pos_ = register_module("pos_encoding",
                           std::make_shared<nn::PositionalEncoding>(c.d_model, c.dropout, 1024));
    nn::TransformerEncoderLayerOptions layer;
    layer.d_model = c.d_model;
    layer.nhead = c.heads;
    layer.dim_feedforward = c.ffn;
    layer.dropout = c.dropout;
    layer.batch_first = true;
    layer.norm_first = false;  // post-norm, as in "Attention Is All You Need" and d2l
    encoder_ =
        register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, c.layers));
    encoder_->set_checkpoint_layers(c.checkpoint_layers);
    head_ = register_module("head", std::make_shared<nn::Linear>(c.d_model, classes));
  }

  // tokens, bigrams, trigrams (B, T) int64 (n-gram ids unused without buckets),
  // key_padding_mask (B, T) bool (true = pad) -> logits (B, classes)
  Tensor forward(const Tensor& tokens, const Tensor& bigrams, const Tensor& trigrams,
                 const Tensor& key_padding_mask) const {
    Tensor x = embedding_->forward(tokens);
    if (bigrams_) x = add(add(x, bigrams_->forward(bigrams)), trigrams_->forward(trigrams));
    x = mul(x, std::sqrt(static_cast<double>(d_model_)));
    x = pos_->forward(x);                                                     // (B, T, d)
    x = encoder_->forward(x, Tensor(), key_padding_mask);                     // (B, T, d)
    Tensor keep = logical_not(key_padding_mask).to(x.dtype()).unsqueeze(-1);  // (B, T, 1)
    Tensor pooled = div(sum(mul(x, keep), {1}), sum(keep, {1}));              // (B, d)
    return head_->forward(pooled);
  }

 private:
  int64_t d_model_;
  std::shared_ptr<nn::Embedding> embedding_, bigrams_, trigrams_;
  std::shared_ptr<nn::PositionalEncoding> pos_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

struct Batch {
  data::PaddedBatch padded;
  Tensor bigrams, trigrams;  // (B, T), padded with 0
  Tensor labels;
};

// A text as model input: its byte tokens and the hashed n-grams at each position.
struct Encoded {
  std::vector<int64_t> tokens, bigrams, trigrams;
};

// Length buckets of the texts' byte counts: similar-length batches waste little on padding.
std::vector<std::vector<int64_t>> length_buckets(const std::vector<Encoded>& seqs,
                                                 int64_t batch_size, uint64_t seed) {
  std::vector<size_t> lengths;
  for (const auto& e : seqs) lengths.push_back(e.tokens.size());
  return examples::length_buckets(lengths, batch_size, seed);
}

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
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a few steps on a small slice (for tests)");
  return cli.parse(argc, argv);
}

// The corpus and each text encoded once. --smoke keeps an evenly spread slice and 2 epochs.
struct LangIdData {
  data::LangIdCorpus corpus;
  std::vector<Encoded> train, test;
};

LangIdData load_data(Config& c, const data::ByteTokenizer& tok) {
  LangIdData d{data::load_fortune_langid(), {}, {}};
  if (c.smoke) {
    auto thin = [](std::vector<data::TextExample>& v, size_t keep) {
      std::vector<data::TextExample> out;
      for (size_t i = 0; i < v.size() && out.size() < keep;
           i += std::max<size_t>(1, v.size() / keep))
        out.push_back(v[i]);
      v = std::move(out);
    };
    thin(d.corpus.train, 256);
    thin(d.corpus.test, 128);
    c.epochs = std::min(c.epochs, 2);
  }
  const int64_t hash_buckets = std::max<int64_t>(c.ngram_buckets, 2);
  auto encode_all = [&](const std::vector<data::TextExample>& v) {
    std::vector<Encoded> seqs;
    for (const auto& ex : v) {
      Encoded e;
      e.tokens = tok.encode(ex.text, static_cast<size_t>(c.max_len));
      e.bigrams = ngram_ids(e.tokens, 2, hash_buckets);
      e.trigrams = ngram_ids(e.tokens, 3, hash_buckets);
      seqs.push_back(std::move(e));
    }
    return seqs;
  };
  d.train = encode_all(d.corpus.train);
  d.test = encode_all(d.corpus.test);
  return d;
}

// The examples `idx` of one split, padded to the longest.
Batch make_batch(const std::vector<Encoded>& seqs, const std::vector<data::TextExample>& examples,
                 const std::vector<int64_t>& idx) {
  std::vector<std::vector<int64_t>> tokens, bigrams, trigrams;
  std::vector<int64_t> labels;
  for (int64_t i : idx) {
    const Encoded& e = seqs[static_cast<size_t>(i)];
    tokens.push_back(e.tokens);
    bigrams.push_back(e.bigrams);
    trigrams.push_back(e.trigrams);
    labels.push_back(examples[static_cast<size_t>(i)].label);
  }
  return Batch{data::pad_sequences(tokens, data::SpecialTokens::kPad),
               data::pad_sequences(bigrams, 0).tokens, data::pad_sequences(trigrams, 0).tokens,
               from_vector(labels, {static_cast<int64_t>(labels.size())})};
}

// The confusion matrix and the mean cross-entropy over the whole test split (eval mode, no
// graph).
struct Evaluation {
  examples::ConfusionMatrix confusion;
  double loss = 0;
};
Evaluation evaluate(LangIdModel& model, const LangIdData& d, bool bf16) {
  NoGradGuard no_grad;
  autocast::Scope autocast_scope(bf16);
  model.eval();
  Evaluation e{examples::ConfusionMatrix(d.corpus.languages)};
  for (const auto& idx : length_buckets(d.test, 256, 0)) {
    Batch b = make_batch(d.test, d.corpus.test, idx);
    const Tensor logits =
        model.forward(b.padded.tokens, b.bigrams, b.trigrams, b.padded.key_padding_mask);
    e.loss += cross_entropy(logits, b.labels, {.reduction = Reduction::Sum}).item() /
              static_cast<double>(d.test.size());
    e.confusion.add(b.labels, argmax(logits, -1));
  }
  model.train();
  return e;
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
  const LangIdData d = load_data(c, tok);
  const auto n_classes = static_cast<int64_t>(d.corpus.languages.size());
  fmt::print("transformer_langid: {} train / {} test texts, {} languages ({}), {}\n",
             d.corpus.train.size(), d.corpus.test.size(), n_classes,
             fmt::join(d.corpus.languages, " "), runtime_info());
  const auto buckets = length_buckets(d.train, c.batch_size, c.seed);
  data::DataLoader<Batch>::Options lopts;
  lopts.batch_size = 1;  // one "item" = one pre-built length bucket
  lopts.seed = c.seed;
  data::DataLoader<Batch> loader(
      static_cast<int64_t>(buckets.size()), lopts, [&](const std::vector<int64_t>& bucket_ids) {
        return make_batch(d.train, d.corpus.train, buckets[static_cast<size_t>(bucket_ids[0])]);
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
      const Evaluation e = evaluate(model, d, c.bf16);
      training.end_epoch({e.confusion.accuracy(), e.loss});
    }
  }
  if (training.stopped()) return 0;
  const double train_s = training.seconds();

  // --- report ---------------------------------------------------------------------------------
  const examples::ConfusionMatrix confusion = evaluate(model, d, c.bf16).confusion;
  const double test_acc = confusion.accuracy();
  confusion.print();
  training.losses().plot(c.out + "/loss.png", "transformer_langid: loss", "cross-entropy");
  confusion.save_heatmap(c.out + "/confusion.png");
  fmt::print(
      "test accuracy {:.4f} after {} steps in {:.1f} s; wrote {}/metrics.csv, loss.png, "
      "confusion.png\n",
      test_acc, training.step(), train_s, c.out);
  const std::string int8_fields =
      c.int8 ? examples::compare_int8(
                   model, [&] { return evaluate(model, d, false).confusion.accuracy(); })
             : "";
  fmt::print(
      "RESULT example=transformer_langid test_accuracy={:.4f} steps={} params={} "
      "train_s={:.1f}{}{}\n",
      test_acc, training.step(), model.num_parameters(), train_s, int8_fields,
      examples::bf16_field(c.bf16));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
