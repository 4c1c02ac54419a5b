// prune_langid: how much of transformer_langid's classifier can be removed. Loads the checkpoint
// transformer_langid writes (training it first, by running transformer_langid, when there is
// none), then sweeps
//   - magnitude pruning: global unstructured (nn::prune::global_unstructured over every Linear
//     and attention projection weight) at 0%, 10%, ..., 90% sparsity;
//   - attention heads: 0 .. heads-1 heads removed per layer, the least important first by
//     Michel et al. 2019's gradient importance (nn::prune::HeadGates), really removed from the
//     projections (MultiheadAttention::prune_heads);
// each evaluated as pruned and after a short fine-tune (AdamW; masks keep pruned weights at 0).
// Writes sparsity.png and heads.png (each also .svg), results.csv, and a RESULT line. The
// head-pruned models' inference time is printed; on a shared machine it is indicative only.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/transformer_langid/langid_model.h"
#include "nabla/core/io/checkpoint.h"
#include "nabla/nabla.h"

using namespace nabla;
using examples::LangIdBatch;
using examples::LangIdData;
using examples::LangIdModel;

namespace {

struct Config {
  std::string langid_dir = "runs/transformer_langid", out = "runs/prune_langid";
  int64_t finetune_steps = 150, importance_batches = 40;
  double finetune_lr = 5e-4;
  uint64_t seed = 42;
  bool smoke = false, resume = false, plot_only = false;
  int64_t stop_after = 0;
  int threads = 0;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli("Magnitude and attention-head pruning of transformer_langid");
  cli.option("--langid-dir", c.langid_dir,
             "transformer_langid's --out: its checkpoint.safetensors is the model to prune")
      .option("--finetune-steps", c.finetune_steps, "steps of the short fine-tune after pruning")
      .option("--finetune-lr", c.finetune_lr, "fine-tune learning rate (AdamW, constant)")
      .option("--importance-batches", c.importance_batches,
              "training batches summed for the head importance")
      .flag("--plot-only", c.plot_only, "only redraw the figures from --out's results.csv")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a smoke checkpoint, a small slice, 5 fine-tune steps (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  if (c.resume || c.stop_after)
    throw ValueError("prune_langid: --resume and --stop-after are not supported");
  if (c.finetune_steps < 0 || c.importance_batches < 1)
    throw ValueError("prune_langid: --finetune-steps must be >= 0, --importance-batches >= 1");
  return std::nullopt;
}

struct Setup {
  Config c;
  examples::LangIdSize size;
  data::ByteTokenizer tok;
  LangIdData d;
  int64_t classes = 0;
  nn::StateDict trained;                      // the checkpoint's model section
  std::vector<std::vector<int64_t>> buckets;  // training batches by length
};

std::unique_ptr<LangIdModel> fresh_model(const Setup& s) {
  auto model = std::make_unique<LangIdModel>(s.size, s.tok.vocab_size(), s.classes);
  model->load_state_dict(s.trained);
  return model;
}

LangIdBatch train_batch(const Setup& s, int64_t i) {
  const auto& idx = s.buckets[static_cast<size_t>(i) % s.buckets.size()];
  return examples::make_batch(s.d.train, s.d.corpus.train, idx);
}

Tensor logits(const LangIdModel& m, const LangIdBatch& b) {
  return m.forward(b.padded.tokens, b.bigrams, b.trigrams, b.padded.key_padding_mask);
}

// A short fine-tune with a fresh AdamW (state made after pruning, so masked weights stay 0).
void finetune(const Setup& s, LangIdModel& model) {
  optim::AdamW opt(model.parameters(), {.lr = s.c.finetune_lr, .weight_decay = 0.01});
  model.train();
  for (int64_t i = 0; i < s.c.finetune_steps; ++i) {
    LangIdBatch b = train_batch(s, i * 7 + 3);  // spread over the length buckets
    Tensor loss = cross_entropy(logits(model, b), b.labels);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
  }
  nn::prune::reapply(model);  // a no-op for a fresh optimizer; kept as the documented rule
}

double accuracy(const Setup& s, LangIdModel& model) {
  return examples::evaluate_langid(model, s.d).confusion.accuracy();
}

// Milliseconds to classify the whole test split (eval mode, no graph).
double test_ms(const Setup& s, LangIdModel& model) {
  NoGradGuard no_grad;
  model.eval();
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& idx : examples::length_buckets(s.d.test, 256, 0))
    (void)logits(model, examples::make_batch(s.d.test, s.d.corpus.test, idx));
  return examples::seconds_since(t0) * 1e3;
}

// Michel et al. 2019: I_h = |sum over batches of dL/dgate_h|, normalised per layer.
std::vector<std::vector<double>> head_importance(const Setup& s, LangIdModel& model) {
  nn::prune::HeadGates gates(model);
  model.eval();  // no dropout: the importance of the model as it predicts
  for (int64_t i = 0; i < s.c.importance_batches; ++i) {
    LangIdBatch b = train_batch(s, i * 5 + 1);
    cross_entropy(logits(model, b), b.labels).backward();
  }
  return gates.importance();
}

// The two figures from results.csv's rows (also --plot-only, which redraws them from a run's
// results.csv without rerunning it).
void plot_results(const std::string& out, int64_t finetune_steps) {
  std::ifstream in(out + "/results.csv");
  if (!in) throw IOError(fmt::format("prune_langid: cannot read {}/results.csv", out));
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> sx, sp, st, hx, hp, ht;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    if (f.size() < 6) continue;
    const bool magnitude = f[0] == "magnitude";
    (magnitude ? sx : hx).push_back(std::stod(f[1]) * (magnitude ? 100.0 : 1.0));
    (magnitude ? sp : hp).push_back(std::stod(f[4]));
    (magnitude ? st : ht).push_back(std::stod(f[5]));
  }
  const std::string tuned = fmt::format("pruned + {} fine-tune steps", finetune_steps);
  viz::line_plot(out + "/sparsity.png",
                 {{.label = "pruned", .x = sx, .y = sp, .color = viz::kPalette[0], .markers = true},
                  {.label = tuned, .x = sx, .y = st, .color = viz::kPalette[1], .markers = true}},
                 {.title = "transformer_langid: global magnitude pruning of the weight matrices",
                  .xlabel = "sparsity of the Linear and attention weights (%)",
                  .ylabel = "test accuracy"});
  viz::line_plot(out + "/heads.png",
                 {{.label = "pruned", .x = hx, .y = hp, .color = viz::kPalette[0], .markers = true},
                  {.label = tuned, .x = hx, .y = ht, .color = viz::kPalette[1], .markers = true}},
                 {.title = "transformer_langid: attention heads removed by importance",
                  .xlabel = "heads removed in each layer (of 4)",
                  .ylabel = "test accuracy"});
}

void load_checkpoint(Setup& s) {
  const std::string path = s.c.langid_dir + "/checkpoint.safetensors";
  if (!std::filesystem::exists(path)) {
    const std::string cmd = fmt::format(
        "'{}' --out '{}'{}{}", NABLA_TRANSFORMER_LANGID_EXE, s.c.langid_dir,
        s.c.smoke ? " --smoke" : "", s.c.threads ? fmt::format(" --threads {}", s.c.threads) : "");
    fmt::print("no checkpoint at {}: training transformer_langid first: {}\n", path, cmd);
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(path))
      throw Error(fmt::format("prune_langid: training transformer_langid failed ({})", cmd));
  }
  s.trained = io::Checkpoint::load(path).section("model");
}

int run(int argc, char** argv) {
  Setup s;
  if (auto exit_code = parse_flags(s.c, argc, argv)) return *exit_code;
  Config& c = s.c;
  if (c.plot_only) {
    plot_results(c.out, c.finetune_steps);
    return 0;
  }
  if (c.threads > 0) set_num_threads(c.threads);
  examples::reuse_blocks_across_lengths();  // batches of varying length (length_buckets)
  if (c.smoke) c.finetune_steps = std::min<int64_t>(c.finetune_steps, 5), c.importance_batches = 3;
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();
  load_checkpoint(s);
  s.d = examples::load_langid_data(s.size, c.smoke, s.tok);
  s.classes = static_cast<int64_t>(s.d.corpus.languages.size());
  s.buckets = examples::length_buckets(s.d.train, 64, c.seed);
  manual_seed(c.seed);
  std::ofstream csv(c.out + "/results.csv");
  csv << "kind,level,sparsity_or_heads_left,params,accuracy_pruned,accuracy_finetuned,test_ms\n";

  // --- magnitude pruning ------------------------------------------------------------------------
  std::vector<double> levels, acc_pruned, acc_tuned;  // by sparsity level
  std::vector<int> tenths = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  if (c.smoke) tenths = {0, 5, 9};
  for (int k : tenths) {
    const double amount = 0.1 * k;
    auto model = fresh_model(s);
    const std::vector<std::string> names = nn::prune::linear_weights(*model);
    nn::prune::global_unstructured(*model, names, amount);
    const double before = accuracy(s, *model);
    finetune(s, *model);
    const double after = accuracy(s, *model);
    int64_t zeros = 0, total = 0;
    for (auto& [name, p] : model->named_parameters())
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        zeros +=
            static_cast<int64_t>(nn::prune::sparsity(p) * static_cast<double>(p.numel()) + 0.5);
        total += p.numel();
      }
    const double sparsity = static_cast<double>(zeros) / static_cast<double>(total);
    fmt::print("magnitude {:>3.0f}%: sparsity after fine-tune {:.3f}, accuracy {:.4f} -> {:.4f}\n",
               amount * 100, sparsity, before, after);
    csv << fmt::format("magnitude,{:.1f},{:.4f},{},{:.4f},{:.4f},\n", amount, sparsity,
                       model->num_parameters(), before, after);
    levels.push_back(amount * 100);
    acc_pruned.push_back(before);
    acc_tuned.push_back(after);
  }
  auto at = [&](double percent, const std::vector<double>& v) {  // nearest level
    size_t best = 0;
    for (size_t i = 0; i < levels.size(); ++i)
      if (std::abs(levels[i] - percent) < std::abs(levels[best] - percent)) best = i;
    return v[best];
  };

  // --- attention heads --------------------------------------------------------------------------
  std::vector<std::vector<double>> importance;
  {
    auto model = fresh_model(s);
    importance = head_importance(s, *model);
  }
  for (size_t l = 0; l < importance.size(); ++l)
    fmt::print("head importance, layer {}: {:.3f}\n", l, fmt::join(importance[l], " "));
  std::vector<double> head_pruned, head_tuned;
  double full_ms = 0;
  for (int64_t k = 0; k < s.size.heads; ++k) {
    auto model = fresh_model(s);
    nn::prune::prune_heads_by_importance(*model, importance, k);
    const double before = accuracy(s, *model);
    const double ms = test_ms(s, *model);
    if (k == 0) full_ms = ms;
    const int64_t params = model->num_parameters();
    finetune(s, *model);
    const double after = accuracy(s, *model);
    fmt::print(
        "heads removed per layer {}: {} parameters, accuracy {:.4f} -> {:.4f}, test split in "
        "{:.0f} ms ({:.2f}x of all heads)\n",
        k, params, before, after, ms, ms / full_ms);
    csv << fmt::format("heads,{},{},{},{:.4f},{:.4f},{:.1f}\n", k, s.size.heads - k, params, before,
                       after, ms);
    head_pruned.push_back(before);
    head_tuned.push_back(after);
  }
  csv.close();
  plot_results(c.out, c.finetune_steps);
  fmt::print("wrote {}/results.csv, sparsity.png and heads.png (.svg) in {:.1f} s\n", c.out,
             examples::seconds_since(t0));
  fmt::print(
      "RESULT example=prune_langid accuracy_dense={:.4f} accuracy_50pct={:.4f} "
      "accuracy_50pct_finetuned={:.4f} accuracy_90pct={:.4f} accuracy_90pct_finetuned={:.4f} "
      "accuracy_one_head={:.4f} accuracy_one_head_finetuned={:.4f} finetune_steps={}\n",
      acc_pruned.front(), at(50, acc_pruned), at(50, acc_tuned), acc_pruned.back(),
      acc_tuned.back(), head_pruned.back(), head_tuned.back(), c.finetune_steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
