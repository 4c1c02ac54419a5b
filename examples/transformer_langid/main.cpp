// transformer_langid, the main example: a Transformer encoder (post-norm, as in the paper and
// d2l) reads the bytes of a fortune cookie and names its language, out of 8, from Debian's
// fortunes packages (see data/langid.h for how the corpus is built and split).
//
//   bytes -> Embedding * sqrt(d) + sinusoidal positions -> N x TransformerEncoderLayer
//         -> mean over the real (non-pad) tokens -> Linear -> 8 logits
//
// Prints a progress bar, per-epoch test accuracy, a confusion matrix; writes metrics.csv,
// loss.png, confusion.png and a checkpoint (resume with --resume). Ends with a RESULT line.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <numeric>

#include "core/io/checkpoint.h"
#include "data/dataloader.h"
#include "data/langid.h"
#include "data/tokenizer.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "nabla.h"

using namespace nabla;

namespace {

struct Config {
  int64_t d_model = 64, heads = 4, layers = 2, ffn = 256, max_len = 128;
  double dropout = 0.1;
  int epochs = 6;
  int64_t batch_size = 64;
  double lr = 2e-3, weight_decay = 0.01;
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/transformer_langid";
  bool resume = false, smoke = false;
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

// The classifier: the encoder stack plus a mean-pool head.
class LangIdModel : public nn::Module {
 public:
  LangIdModel(const Config& c, int64_t vocab, int64_t classes)
      : Module("LangIdModel"), d_model_(c.d_model) {
    embedding_ = register_module(
        "embedding", std::make_shared<nn::Embedding>(vocab, c.d_model, data::SpecialTokens::kPad));
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
    head_ = register_module("head", std::make_shared<nn::Linear>(c.d_model, classes));
  }

  // tokens (B, T) int64, key_padding_mask (B, T) bool (true = pad) -> logits (B, classes)
  Tensor forward(const Tensor& tokens, const Tensor& key_padding_mask) const {
    Tensor x = mul(embedding_->forward(tokens), std::sqrt(static_cast<double>(d_model_)));
    x = pos_->forward(x);                                                     // (B, T, d)
    x = encoder_->forward(x, Tensor(), key_padding_mask);                     // (B, T, d)
    Tensor keep = logical_not(key_padding_mask).to(x.dtype()).unsqueeze(-1);  // (B, T, 1)
    Tensor pooled = div(sum(mul(x, keep), {1}), sum(keep, {1}));              // (B, d)
    return head_->forward(pooled);
  }

 private:
  int64_t d_model_;
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::PositionalEncoding> pos_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

struct Batch {
  data::PaddedBatch padded;
  Tensor labels;
};

// Batches of similar length (less padding): examples sorted by length with a seeded tie-break,
// cut into batches; the DataLoader then shuffles the order of the batches every epoch.
std::vector<std::vector<int64_t>> length_buckets(const std::vector<std::vector<int64_t>>& seqs,
                                                 int64_t batch_size, uint64_t seed) {
  std::vector<int64_t> order(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> shuffled =
      data::epoch_order(static_cast<int64_t>(seqs.size()), true, seed, 0);
  std::vector<int64_t> rank(seqs.size());
  for (size_t i = 0; i < shuffled.size(); ++i)
    rank[static_cast<size_t>(shuffled[i])] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    auto la = seqs[static_cast<size_t>(a)].size(), lb = seqs[static_cast<size_t>(b)].size();
    return la != lb ? la < lb : rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
  });
  std::vector<std::vector<int64_t>> batches;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch_size))
    batches.emplace_back(order.begin() + static_cast<int64_t>(i),
                         order.begin() + static_cast<int64_t>(std::min(
                                             order.size(), i + static_cast<size_t>(batch_size))));
  return batches;
}

int run(int argc, char** argv) {
  Config c;
  CLI::App app{"Transformer encoder language identification on Debian's fortunes (8 languages)"};
  app.add_option("--epochs", c.epochs, "training epochs");
  app.add_option("--batch-size", c.batch_size, "examples per batch");
  app.add_option("--d-model", c.d_model, "model width");
  app.add_option("--heads", c.heads, "attention heads");
  app.add_option("--layers", c.layers, "encoder layers");
  app.add_option("--ffn", c.ffn, "feed-forward width");
  app.add_option("--max-len", c.max_len, "bytes kept per text");
  app.add_option("--dropout", c.dropout, "dropout");
  app.add_option("--lr", c.lr, "peak learning rate (AdamW)");
  app.add_option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay");
  app.add_option("--seed", c.seed, "seed for init, dropout and shuffling");
  app.add_option("--out", c.out, "output directory (metrics, plots, checkpoint)");
  app.add_option("--threads", c.threads, "threads (default: OMP_NUM_THREADS or all cores)");
  app.add_flag("--resume", c.resume, "continue from <out>/checkpoint.safetensors");
  app.add_flag("--smoke", c.smoke, "a few steps on a small slice (for tests)");
  app.add_option("--stop-after", c.stop_after,
                 "stop (as if interrupted) at the first checkpoint at or after this step");
  CLI11_PARSE(app, argc, argv);
  if (c.threads > 0) set_num_threads(c.threads);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data ---------------------------------------------------------------------------------
  data::LangIdCorpus corpus = data::load_fortune_langid();
  if (c.smoke) {
    auto thin = [](std::vector<data::TextExample>& v, size_t keep) {
      std::vector<data::TextExample> out;
      for (size_t i = 0; i < v.size() && out.size() < keep;
           i += std::max<size_t>(1, v.size() / keep))
        out.push_back(v[i]);
      v = std::move(out);
    };
    thin(corpus.train, 256);
    thin(corpus.test, 128);
    c.epochs = std::min(c.epochs, 2);
  }
  const auto n_classes = static_cast<int64_t>(corpus.languages.size());
  data::ByteTokenizer tok;
  auto encode_all = [&](const std::vector<data::TextExample>& v) {
    std::vector<std::vector<int64_t>> seqs;
    for (const auto& ex : v) seqs.push_back(tok.encode(ex.text, static_cast<size_t>(c.max_len)));
    return seqs;
  };
  const auto train_seqs = encode_all(corpus.train), test_seqs = encode_all(corpus.test);
  fmt::print("transformer_langid: {} train / {} test texts, {} languages ({}), {}\n",
             corpus.train.size(), corpus.test.size(), n_classes, fmt::join(corpus.languages, " "),
             runtime_info());

  auto make_batch = [&](const std::vector<std::vector<int64_t>>& seqs,
                        const std::vector<data::TextExample>& examples,
                        const std::vector<int64_t>& idx) {
    std::vector<std::vector<int64_t>> s;
    std::vector<int64_t> labels;
    for (int64_t i : idx) {
      s.push_back(seqs[static_cast<size_t>(i)]);
      labels.push_back(examples[static_cast<size_t>(i)].label);
    }
    return Batch{data::pad_sequences(s, data::SpecialTokens::kPad),
                 from_vector(labels, {static_cast<int64_t>(labels.size())})};
  };
  const auto buckets = length_buckets(train_seqs, c.batch_size, c.seed);
  data::DataLoader<Batch>::Options lopts;
  lopts.batch_size = 1;  // one "item" = one pre-built length bucket
  lopts.seed = c.seed;
  data::DataLoader<Batch> loader(
      static_cast<int64_t>(buckets.size()), lopts, [&](const std::vector<int64_t>& bucket_ids) {
        return make_batch(train_seqs, corpus.train, buckets[static_cast<size_t>(bucket_ids[0])]);
      });

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  LangIdModel model(c, tok.vocab_size(), n_classes);
  optim::AdamW opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  const int64_t warmup = std::min(c.warmup_steps, std::max<int64_t>(1, total_steps / 5));
  optim::SequentialLR sched(
      opt,
      {std::make_shared<optim::LinearLR>(opt, 0.01, 1.0, warmup),
       std::make_shared<optim::CosineAnnealingLR>(opt, total_steps - warmup, c.lr * 0.01)},
      {warmup});
  fmt::print("model: {} parameters, {} steps ({} per epoch)\n", model.num_parameters(), total_steps,
             steps_per_epoch);

  const std::string ckpt_path = c.out + "/checkpoint.safetensors";
  int64_t step = 0;
  double ema = 0, test_acc = 0;  // ema: smoothed training loss for the progress bar and CSV
  if (c.resume && std::filesystem::exists(ckpt_path)) {
    io::Checkpoint ck = io::Checkpoint::load(ckpt_path);
    model.load_state_dict(ck.section("model"));
    opt.load_state_dict(ck.section("optimizer"));
    sched.load_state_dict(ck.section("scheduler"));
    io::load_generator(ck, "default", default_generator());
    io::LoaderPosition pos = io::load_loader_position(ck, "train");
    loader.restore({pos.epoch, pos.batch});
    step = ck.get_int("step");
    ema = ck.get_float("loss_ema");
    fmt::print("resumed from {} at step {}\n", ckpt_path, step);
  }
  examples::CsvLogger csv(c.out + "/metrics.csv", {"step", "epoch", "loss", "lr", "test_accuracy"},
                          c.resume);

  auto evaluate = [&](std::vector<std::vector<int64_t>>* confusion) {
    NoGradGuard no_grad;
    model.eval();
    int64_t correct = 0;
    const auto test_buckets = length_buckets(test_seqs, 256, 0);
    for (const auto& idx : test_buckets) {
      Batch b = make_batch(test_seqs, corpus.test, idx);
      Tensor pred = argmax(model.forward(b.padded.tokens, b.padded.key_padding_mask), -1);
      auto p = pred.to_vector<int64_t>(), y = b.labels.to_vector<int64_t>();
      for (size_t i = 0; i < p.size(); ++i) {
        correct += p[i] == y[i];
        if (confusion) (*confusion)[static_cast<size_t>(y[i])][static_cast<size_t>(p[i])]++;
      }
    }
    model.train();
    return static_cast<double>(correct) / static_cast<double>(corpus.test.size());
  };

  // --- training -------------------------------------------------------------------------------
  std::vector<double> loss_x, loss_y, acc_x, acc_y;
  examples::ProgressBar bar("train", total_steps, 50);
  model.train();
  for (; step < total_steps;) {
    auto batch = loader.next();
    if (!batch) {
      loader.next_epoch();
      continue;
    }
    Tensor logits = model.forward(batch->padded.tokens, batch->padded.key_padding_mask);
    Tensor loss = cross_entropy(logits, batch->labels);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched.step();
    ++step;
    const double l = loss.item();
    ema = step == 1 ? l : 0.98 * ema + 0.02 * l;
    loss_x.push_back(static_cast<double>(step));
    loss_y.push_back(l);
    bar.update(step, {{"loss", ema}, {"lr", opt.param_groups()[0].lr}}, batch->labels.numel());
    const bool epoch_end = step % steps_per_epoch == 0 || step == total_steps;
    if (epoch_end) {
      test_acc = evaluate(nullptr);
      acc_x.push_back(static_cast<double>(step));
      acc_y.push_back(test_acc);
      bar.finish();
      fmt::print("epoch {} step {}: train loss {:.4f}, test accuracy {:.4f}\n",
                 step / steps_per_epoch, step, ema, test_acc);
      csv.row({static_cast<double>(step), static_cast<double>(step / steps_per_epoch), ema,
               opt.param_groups()[0].lr, test_acc});
      io::Checkpoint ck;
      ck.put_section("model", model.state_dict());
      ck.put_section("optimizer", opt.state_dict());
      ck.put_section("scheduler", sched.state_dict());
      io::save_generator(ck, "default", default_generator());
      ck.set("step", step);
      ck.set("loss_ema", ema);
      io::save_loader_position(ck, "train", {loader.cursor().epoch, loader.cursor().batch});
      ck.save(ckpt_path);
      if (c.stop_after > 0 && step >= c.stop_after && step < total_steps) {
        fmt::print("stopping at step {} as asked (--stop-after); continue with --resume\n", step);
        return 0;
      }
    }
  }
  const double train_s = examples::seconds_since(t0);

  // --- report ---------------------------------------------------------------------------------
  std::vector<std::vector<int64_t>> confusion(static_cast<size_t>(n_classes),
                                              std::vector<int64_t>(static_cast<size_t>(n_classes)));
  test_acc = evaluate(&confusion);
  fmt::print("\nconfusion matrix (rows: true language, columns: predicted)\n      ");
  for (const auto& l : corpus.languages) fmt::print("{:>6}", l);
  fmt::print("\n");
  std::vector<std::vector<double>> conf_d;
  for (size_t i = 0; i < confusion.size(); ++i) {
    fmt::print("{:>6}", corpus.languages[i]);
    conf_d.emplace_back();
    for (int64_t v : confusion[i]) {
      fmt::print("{:>6}", v);
      conf_d.back().push_back(static_cast<double>(v));
    }
    fmt::print("\n");
  }
  viz::line_plot(c.out + "/loss.png", {{"train loss", loss_x, loss_y, viz::kPalette[0]}},
                 {"transformer_langid: training loss", "step", "cross-entropy"});
  viz::heatmap(c.out + "/confusion.png", conf_d, "confusion (true x predicted)", corpus.languages,
               corpus.languages);
  fmt::print(
      "test accuracy {:.4f} after {} steps in {:.1f} s; wrote {}/metrics.csv, loss.png, "
      "confusion.png\n",
      test_acc, step, train_s, c.out);
  fmt::print(
      "RESULT example=transformer_langid test_accuracy={:.4f} steps={} params={} "
      "train_s={:.1f}\n",
      test_acc, step, model.num_parameters(), train_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
