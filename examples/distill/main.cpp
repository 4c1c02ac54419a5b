// distill: knowledge distillation (Hinton, Vinyals, Dean 2015, arXiv:1503.02531) on
// Fashion-MNIST. The teacher is vit_fashion_mnist's default ViT (its checkpoint, or trained
// first by running vit_fashion_mnist itself); the student is the same architecture at half the
// width (about a quarter of the parameters). For each seed the student trains twice on the same
// batches in the same order for the same epochs: alone (cross-entropy, which is
// distillation_loss with alpha 0) and distilled (alpha * T^2 * KL of the tempered distributions
// + (1 - alpha) * cross-entropy). Prints mean and spread of test accuracy, parameter counts and
// inference time per image; writes accuracy.png/.svg (test accuracy per seed), results.csv
// and a RESULT line.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "examples/common/cli.h"
#include "examples/common/fashion_mnist.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/vit_fashion_mnist/vit_model.h"
#include "nabla/core/io/checkpoint.h"
#include "nabla/data/dataloader.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Config {
  int seeds = 3, epochs = 10;
  double temperature = 4.0, alpha = 0.7;
  int64_t student_dim = 32, student_mlp = 64, batch_size = 64, warmup_steps = 200;
  double lr = 3e-3, weight_decay = 0.05;  // vit_fashion_mnist's recipe
  std::string teacher_dir = "runs/vit_fashion_mnist", out = "runs/distill";
  uint64_t seed = 1;  // the seeds are seed, seed + 1, ...
  bool smoke = false, resume = false, plot_only = false;
  int64_t stop_after = 0;
  int threads = 0;
};

struct Batch {
  Tensor images, labels;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli("Distil vit_fashion_mnist's ViT into a quarter-size student");
  cli.option("--seeds", c.seeds, "students per variant (seeds seed, seed + 1, ...)")
      .option("--epochs", c.epochs, "student training epochs (each variant)")
      .option("--temperature", c.temperature, "softmax temperature T of the soft targets")
      .option("--alpha", c.alpha, "weight of the soft (distillation) term, in [0, 1]")
      .option("--student-dim", c.student_dim, "student token width")
      .option("--student-mlp", c.student_mlp, "student feed-forward width")
      .option("--teacher-dir", c.teacher_dir,
              "vit_fashion_mnist's --out: its checkpoint.safetensors is the teacher")
      .flag("--plot-only", c.plot_only, "only redraw accuracy.png from --out's results.csv")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a smoke teacher, 1 epoch on 256 train / 256 test images, 2 seeds (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  if (c.seeds < 1) throw ValueError(fmt::format("--seeds must be >= 1, got {}", c.seeds));
  if (!(c.alpha >= 0 && c.alpha <= 1))
    throw ValueError(fmt::format("--alpha must be in [0, 1], got {}", c.alpha));
  if (!(c.temperature > 0))
    throw ValueError(fmt::format("--temperature must be > 0, got {}", c.temperature));
  if (c.resume || c.stop_after)
    throw ValueError("distill: --resume and --stop-after are not supported (runs are short)");
  return std::nullopt;
}

// The teacher's size: vit_fashion_mnist's default (its --smoke keeps at most 2 blocks).
examples::FashionVitSize teacher_size(bool smoke) {
  examples::FashionVitSize s;
  if (smoke) s.depth = std::min<int64_t>(s.depth, 2);
  return s;
}

// Loads the teacher from vit_fashion_mnist's checkpoint, first running vit_fashion_mnist with
// its defaults (--smoke for a smoke run) when there is none.
std::shared_ptr<nn::ViT> load_teacher(const Config& c) {
  const std::string path = c.teacher_dir + "/checkpoint.safetensors";
  if (!std::filesystem::exists(path)) {
    const std::string cmd = fmt::format("'{}' --out '{}'{}{}", NABLA_VIT_FASHION_MNIST_EXE,
                                        c.teacher_dir, c.smoke ? " --smoke" : "",
                                        c.threads ? fmt::format(" --threads {}", c.threads) : "");
    fmt::print("no teacher checkpoint at {}: training it first: {}\n", path, cmd);
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(path))
      throw Error(fmt::format("distill: training the teacher failed ({})", cmd));
  }
  auto teacher = std::make_shared<nn::ViT>(examples::fashion_vit_config(teacher_size(c.smoke)));
  teacher->load_state_dict(io::Checkpoint::load(path).section("model"));
  teacher->eval();
  return teacher;
}

double accuracy(nn::ViT& model, const examples::FashionData& d) {
  return examples::evaluate_fashion(
             model, [&](const Tensor& x) { return model.forward(x); }, d, 0.0)
      .confusion.accuracy();
}

// Microseconds per test image: the best of 5 passes over 2000 test images, batches of 500, in
// eval mode without a graph (the best pass is the one least disturbed by other processes).
double inference_us(nn::ViT& model, const examples::FashionData& d) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = std::min<int64_t>(d.test_x.size(0), 2000);
  double best = INFINITY;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; i += 500)
      (void)model.forward(d.test_x.narrow(0, i, std::min<int64_t>(500, n - i)));
    best = std::min(best, examples::seconds_since(t0) * 1e6 / static_cast<double>(n));
  }
  return best;
}

struct StudentRun {
  std::vector<double> accuracy_per_epoch;
  double accuracy = 0, inference_us = 0;
  int64_t params = 0;
};

// One student; teacher == nullptr trains it alone. Same seed: same init and batch order.
StudentRun train_student(const Config& c, const examples::FashionData& d, uint64_t seed,
                         nn::ViT* teacher) {
  const bool distil = teacher != nullptr;
  data::DataLoader<Batch>::Options lopts;
  lopts.batch_size = c.batch_size;
  lopts.seed = seed;
  data::DataLoader<Batch> loader(d.train_x.size(0), lopts, [&](const std::vector<int64_t>& idx) {
    Tensor i = from_vector(idx, {static_cast<int64_t>(idx.size())});
    return Batch{index_select(d.train_x, 0, i), index_select(d.train.labels, 0, i)};
  });
  manual_seed(seed);
  examples::FashionVitSize size = teacher_size(c.smoke);
  size.dim = c.student_dim;
  size.mlp = c.student_mlp;
  nn::ViT student(examples::fashion_vit_config(size));
  optim::AdamW opt(student.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t total = loader.batches_per_epoch() * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total);
  examples::ProgressBar bar(fmt::format("seed {} {}", seed, distil ? "distilled" : "alone"), total);
  StudentRun run;
  int64_t step = 0;
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    student.train();
    while (auto batch = loader.next()) {
      Tensor teacher_logits;
      if (distil) {
        NoGradGuard no_grad;
        teacher_logits = teacher->forward(batch->images);
      }
      Tensor logits = student.forward(batch->images);
      Tensor loss =
          distil ? distillation_loss(logits, teacher_logits, batch->labels, c.temperature, c.alpha)
                 : cross_entropy(logits, batch->labels);
      opt.zero_grad();
      loss.backward();
      optim::clip_grad_norm_(student.parameters(), 1.0);
      opt.step();
      sched->step();
      bar.update(++step, {{"loss", loss.item()}}, batch->labels.numel());
    }
    loader.next_epoch();
    run.accuracy_per_epoch.push_back(accuracy(student, d));
  }
  bar.finish();
  run.accuracy = run.accuracy_per_epoch.back();
  run.inference_us = inference_us(student, d);
  run.params = student.num_parameters();
  fmt::print("seed {} {}: test accuracy {:.4f}\n", seed, distil ? "distilled" : "alone",
             run.accuracy);
  return run;
}

struct Summary {
  double mean = 0, stddev = 0, min = 0, max = 0;
};
Summary summarise(const std::vector<StudentRun>& runs) {
  Summary s{0, 0, 1, 0};
  for (const auto& r : runs) {
    s.mean += r.accuracy / static_cast<double>(runs.size());
    s.min = std::min(s.min, r.accuracy);
    s.max = std::max(s.max, r.accuracy);
  }
  for (const auto& r : runs) s.stddev += (r.accuracy - s.mean) * (r.accuracy - s.mean);
  s.stddev = runs.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(runs.size() - 1)) : 0.0;
  return s;
}

double mean_of(const std::vector<StudentRun>& runs, double StudentRun::*field) {
  double m = 0;
  for (const auto& r : runs) m += r.*field / static_cast<double>(runs.size());
  return m;
}

// Test accuracy per seed, each student variant and the teacher, from results.csv (also
// --plot-only, which redraws it from a run's results.csv without rerunning it).
void plot_results(const std::string& out, double temperature, double alpha) {
  std::ifstream in(out + "/results.csv");
  if (!in) throw IOError(fmt::format("distill: cannot read {}/results.csv", out));
  std::string line;
  std::getline(in, line);  // header
  std::map<std::string, viz::Series> by_model;
  double teacher = 0;
  std::vector<double> seeds;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    if (f.size() < 4) continue;
    if (f[0] == "teacher") {
      teacher = std::stod(f[2]);
      continue;
    }
    viz::Series& sr = by_model[f[0]];
    sr.x.push_back(std::stod(f[1]));
    sr.y.push_back(std::stod(f[2]));
    sr.label = fmt::format("{} ({} params)",
                           f[0] == "student_alone" ? "student alone" : "student distilled", f[3]);
    sr.markers = true;
    sr.lines = false;
    sr.color = viz::kPalette[f[0] == "student_alone" ? 0 : 1];
    seeds.push_back(std::stod(f[1]));
  }
  if (seeds.empty()) throw ValueError(fmt::format("distill: no student rows in {}", out));
  std::vector<viz::Series> series;
  for (auto& [name, sr] : by_model) series.push_back(sr);
  const auto [lo, hi] = std::minmax_element(seeds.begin(), seeds.end());
  series.push_back({.label = "teacher",
                    .x = {*lo - 0.25, *hi + 0.25},
                    .y = {teacher, teacher},
                    .color = viz::kPalette[2]});
  viz::line_plot(out + "/accuracy.png", series,
                 {.title = fmt::format("Fashion-MNIST: student alone vs distilled (T {}, alpha {})",
                                       temperature, alpha),
                  .xlabel = "seed",
                  .ylabel = "test accuracy"});
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  if (c.plot_only) {
    plot_results(c.out, c.temperature, c.alpha);
    return 0;
  }
  if (c.threads > 0) set_num_threads(c.threads);
  if (c.smoke) c.epochs = 1, c.seeds = std::min(c.seeds, 2);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  std::shared_ptr<nn::ViT> teacher = load_teacher(c);
  const examples::FashionData d =
      examples::load_fashion_mnist(c.smoke ? 256 : 0, c.smoke ? 256 : 0);
  const double teacher_acc = accuracy(*teacher, d);
  const double teacher_us = inference_us(*teacher, d);
  fmt::print(
      "distill: {} train / {} test images, {}\nteacher: {} parameters, test accuracy {:.4f}\n",
      d.train_x.size(0), d.test_x.size(0), runtime_info(), teacher->num_parameters(), teacher_acc);

  std::vector<StudentRun> alone, distilled;
  for (int i = 0; i < c.seeds; ++i) {
    const uint64_t seed = c.seed + static_cast<uint64_t>(i);
    alone.push_back(train_student(c, d, seed, nullptr));
    distilled.push_back(train_student(c, d, seed, teacher.get()));
  }

  // --- report ---------------------------------------------------------------------------------
  const Summary sa = summarise(alone), sd = summarise(distilled);
  const int64_t student_params = alone.front().params;
  std::ofstream csv(c.out + "/results.csv");
  csv << "model,seed,test_accuracy,params,inference_us_per_image\n";
  csv << fmt::format("teacher,,{:.4f},{},{:.1f}\n", teacher_acc, teacher->num_parameters(),
                     teacher_us);
  for (int i = 0; i < c.seeds; ++i) {
    for (auto [name, runs] : {std::pair{"alone", &alone}, std::pair{"distilled", &distilled}}) {
      const StudentRun& r = (*runs)[static_cast<size_t>(i)];
      csv << fmt::format("student_{},{},{:.4f},{},{:.1f}\n", name,
                         c.seed + static_cast<uint64_t>(i), r.accuracy, r.params, r.inference_us);
    }
  }
  fmt::print("\n{:<20} {:>10} {:>22} {:>14}\n", "model", "params", "test accuracy", "us / image");
  fmt::print("{:<20} {:>10} {:>22.4f} {:>14.1f}\n", "teacher", teacher->num_parameters(),
             teacher_acc, teacher_us);
  for (auto [name, s, runs] :
       {std::tuple{"student alone", sa, &alone}, std::tuple{"student distilled", sd, &distilled}})
    fmt::print("{:<20} {:>10} {:>12.4f} +- {:.4f} {:>14.1f}   (min {:.4f}, max {:.4f}, n {})\n",
               name, student_params, s.mean, s.stddev, mean_of(*runs, &StudentRun::inference_us),
               s.min, s.max, runs->size());
  fmt::print("(inference: the best of 5 passes; on a shared machine, indicative only)\n");

  csv.close();
  plot_results(c.out, c.temperature, c.alpha);
  fmt::print("wrote {}/results.csv and accuracy.png/.svg in {:.1f} s\n", c.out,
             examples::seconds_since(t0));
  fmt::print(
      "RESULT example=distill teacher_accuracy={:.4f} teacher_params={} student_params={} "
      "alone_mean={:.4f} alone_std={:.4f} distilled_mean={:.4f} distilled_std={:.4f} seeds={} "
      "epochs={} temperature={} alpha={} teacher_us={:.1f} alone_us={:.1f} distilled_us={:.1f}\n",
      teacher_acc, teacher->num_parameters(), student_params, sa.mean, sa.stddev, sd.mean,
      sd.stddev, c.seeds, c.epochs, c.temperature, c.alpha, teacher_us,
      mean_of(alone, &StudentRun::inference_us), mean_of(distilled, &StudentRun::inference_us));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
