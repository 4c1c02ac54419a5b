// checkpoint: what gradient checkpointing (core/grad_checkpoint.h) saves and costs on
// encoder_large's training step, the model and config of bench/encoder.cpp --config large
// (B 16, T 256, d 256, 8 heads, FFN 1024, 4 post-norm layers, dropout 0.1, vocab 1000, 10
// classes; zero_grad + forward + cross_entropy + backward + AdamW step), with and without
// TransformerEncoder::set_checkpoint_layers.
//
//   bench_checkpoint --variant plain|checkpoint   one variant: the MEASURE line of bench/common.h
//                                                 plus peak_live_mb= (the allocator's highest
//                                                 live bytes in a step: parameters, AdamW state,
//                                                 activations)
//   bench_checkpoint                              both, each in a process of its own (peak RSS is
//                                                 per process), then one line
//   RESULT bench=checkpoint.encoder_large plain_ms=<m> checkpoint_ms=<m> time_ratio=<c/p>
//          plain_rss_mb=<r> checkpoint_rss_mb=<r> rss_ratio=<c/p> plain_peak_live_mb=<l>
//          checkpoint_peak_live_mb=<l> live_ratio=<c/p> target_met=yes|no threads=<n>
// The target (issue 22): rss_ratio <= 0.5 at time_ratio <= 1.35. Timings mean something only on
// a quiet machine from the release preset, as every bench here (bench/run.py).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

constexpr int64_t kBatch = 16, kSeq = 256, kModel = 256, kHeads = 8, kFfn = 1024, kLayers = 4;
constexpr int64_t kVocab = 1000, kClasses = 10;

// bench/encoder.cpp's EncoderClassifier at its large config.
class EncoderClassifier : public nn::Module {
 public:
  explicit EncoderClassifier(bool checkpoint_layers) : Module("EncoderClassifier") {
    embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(kVocab, kModel));
    pos_ = register_module("pos_encoding",
                           std::make_shared<nn::PositionalEncoding>(kModel, 0.1, kSeq));
    const nn::TransformerEncoderLayerOptions layer{.d_model = kModel,
                                                   .nhead = kHeads,
                                                   .dim_feedforward = kFfn,
                                                   .dropout = 0.1,
                                                   .batch_first = true};
    encoder_ = register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, kLayers));
    encoder_->set_checkpoint_layers(checkpoint_layers);
    head_ = register_module("head", std::make_shared<nn::Linear>(kModel, kClasses));
  }

  Tensor forward(const Tensor& tokens) const {
    Tensor x = encoder_->forward(pos_->forward(embedding_->forward(tokens)));
    return head_->forward(mean(x, {1}));
  }

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::PositionalEncoding> pos_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

// One variant in this process: prints its MEASURE line.
void measure(const bench::Options& opt, bool checkpoint_layers) {
  manual_seed(0);
  EncoderClassifier model(checkpoint_layers);
  optim::AdamW adamw(model.parameters(), {.lr = 1e-3});
  Generator gen(1);
  const Tensor tokens = randint(0, kVocab, {kBatch, kSeq}, gen);
  const Tensor labels = randint(0, kClasses, {kBatch}, gen);
  const double base_rss = bench::peak_rss_mb();
  model.train();
  size_t peak_live = 0;
  const bench::Timing t = bench::time_it(opt, [&] {
    allocator::start_peak_watch();
    adamw.zero_grad();
    Tensor loss = cross_entropy(model.forward(tokens), labels);
    loss.backward();
    adamw.step();
    peak_live = std::max(peak_live, allocator::peak_live_bytes());
    allocator::stop_peak_watch();
  });
  bench::report(
      t, base_rss,
      {{"peak_live_mb", fmt::format("{:.1f}", static_cast<double>(peak_live) / 1048576.0)},
       {"checkpoint_layers", checkpoint_layers ? "1" : "0"}});
}

// Runs this program again with `--variant name`; returns the fields of its MEASURE line.
std::map<std::string, std::string> run_variant(const bench::Options& opt, const std::string& name) {
  std::array<char, 4096> exe{};
  const ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n <= 0) throw std::runtime_error("bench_checkpoint: cannot find its own executable");
  const std::string cmd = fmt::format("'{}' --variant {} --threads {} --warmup {} --reps {}",
                                      std::string(exe.data(), static_cast<size_t>(n)), name,
                                      opt.threads, opt.warmup, opt.reps);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("bench_checkpoint: cannot run " + cmd);
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), pipe.get())) out += buf.data();
  const auto at = out.find("MEASURE ");
  if (at == std::string::npos)
    throw std::runtime_error(fmt::format("bench_checkpoint: '{}' printed no MEASURE line", cmd));
  std::map<std::string, std::string> fields;
  std::istringstream line(out.substr(at + 8, out.find('\n', at) - at - 8));
  for (std::string kv; line >> kv;)
    if (auto eq = kv.find('='); eq != std::string::npos)
      fields[kv.substr(0, eq)] = kv.substr(eq + 1);
  return fields;
}

double number(const std::map<std::string, std::string>& fields, const std::string& key) {
  auto it = fields.find(key);
  if (it == fields.end()) throw std::runtime_error("bench_checkpoint: no field " + key);
  return std::stod(it->second);
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"nabla: encoder_large's training step with and without checkpoint_layers"};
  bench::Options opt;
  opt.warmup = 2;
  opt.reps = 10;
  std::string variant = "both";
  bench::add_common_options(app, opt);
  app.add_option("--variant", variant, "plain | checkpoint | both (each in its own process)")
      ->check(CLI::IsMember({"plain", "checkpoint", "both"}));
  CLI11_PARSE(app, argc, argv);
  if (variant != "both") {
    bench::apply_threads(opt);
    measure(opt, variant == "checkpoint");
    return 0;
  }
  const auto plain = run_variant(opt, "plain");
  const auto checked = run_variant(opt, "checkpoint");
  const double time_ratio = number(checked, "ms") / number(plain, "ms");
  const double rss_ratio = number(checked, "rss_mb") / number(plain, "rss_mb");
  const double live_ratio = number(checked, "peak_live_mb") / number(plain, "peak_live_mb");
  fmt::print(
      "RESULT bench=checkpoint.encoder_large plain_ms={:.4g} checkpoint_ms={:.4g} "
      "time_ratio={:.3f} plain_rss_mb={} checkpoint_rss_mb={} rss_ratio={:.3f} "
      "plain_peak_live_mb={} checkpoint_peak_live_mb={} live_ratio={:.3f} target_met={} "
      "threads={}\n",
      number(plain, "ms"), number(checked, "ms"), time_ratio, plain.at("rss_mb"),
      checked.at("rss_mb"), rss_ratio, plain.at("peak_live_mb"), checked.at("peak_live_mb"),
      live_ratio, rss_ratio <= 0.5 && time_ratio <= 1.35 ? "yes" : "no", plain.at("threads"));
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_checkpoint: {}\n", e.what());
  return 1;
}
