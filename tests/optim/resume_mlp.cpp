// resume_mlp: a small but complete training run used by tests/optim/test_resume.cpp to show that
// resuming from a checkpoint in a new process reproduces the uninterrupted run bit for bit.
//
// Model:  Linear(8,32) LayerNorm GELU Dropout(0.1) Linear(32,32) LayerNorm GELU Dropout(0.1)
//         Linear(32,4), both dropouts drawing from one seeded Generator.
// Data:   96 synthetic samples (8 features, 4 classes), a shuffling DataLoader, batch 16.
// Train:  cross-entropy, AdamW, LinearLR warm-up (5 steps) then cosine via SequentialLR,
//         clip_grad_norm_(1.0). The schedule steps once per training step.
//
//   resume_mlp --steps N [--resume CKPT] [--save CKPT --save-every K] [--final CKPT]
//              [--kill-at S]
// Prints "step <i> loss <hex float> norm <hex float>" for every step it runs and, at the end,
// "checksum <hex>" of the model's bytes. --save writes a checkpoint (atomically) after every K-th
// step, --final one after the last step, --kill-at S raises SIGKILL right after step S's update
// (before its checkpoint): a crash.
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "nabla/core/io/checkpoint.h"
#include "nabla/data/dataloader.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Args {
  int64_t steps = 40;
  std::string resume, save, final_path;
  int64_t save_every = 0;
  int64_t kill_at = -1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "resume_mlp: %s\nusage: resume_mlp --steps N [--resume CKPT] [--save CKPT "
               "--save-every K] [--final CKPT] [--kill-at S]\n",
               why.c_str());
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--steps")
      a.steps = std::stoll(value);
    else if (flag == "--resume")
      a.resume = value;
    else if (flag == "--save")
      a.save = value;
    else if (flag == "--save-every")
      a.save_every = std::stoll(value);
    else if (flag == "--final")
      a.final_path = value;
    else if (flag == "--kill-at")
      a.kill_at = std::stoll(value);
    else
      usage("unknown flag " + flag);
  }
  if (!a.save.empty() && a.save_every <= 0) usage("--save needs --save-every K > 0");
  return a;
}

struct Batch {
  Tensor x, y;  // x (B, 8) float32, y (B,) int64
};

// 96 samples; the class is the quadrant of (x0 + x2, x1 - x3).
std::pair<Tensor, Tensor> make_dataset() {
  Generator gen(2024);
  Tensor x = randn({96, 8}, gen);
  std::vector<int64_t> labels;
  const auto v = x.to_vector<float>();
  for (size_t i = 0; i < 96; ++i) {
    const float a = v[i * 8 + 0] + v[i * 8 + 2], b = v[i * 8 + 1] - v[i * 8 + 3];
    labels.push_back((a > 0 ? 1 : 0) + (b > 0 ? 2 : 0));
  }
  return {x, from_vector<int64_t>(labels, {96})};
}

// FNV-1a over the bytes of every tensor of a state dict.
uint64_t checksum(const nn::StateDict& dict) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [name, t] : dict) {
    Tensor c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.storage()->data()) +
                    static_cast<size_t>(c.offset()) * dtype_size(c.dtype());
    for (size_t i = 0; i < static_cast<size_t>(c.numel()) * dtype_size(c.dtype()); ++i) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  }
  return h;
}

int run(const Args& args) {
  manual_seed(0);  // the initial weights (replaced by the checkpoint when resuming)
  Generator dropout_gen(7);
  auto drop1 = std::make_shared<nn::Dropout>(0.1), drop2 = std::make_shared<nn::Dropout>(0.1);
  drop1->set_generator(dropout_gen);
  drop2->set_generator(dropout_gen);
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::LayerNorm>(32),
      std::make_shared<nn::GELU>(), drop1, std::make_shared<nn::Linear>(32, 32),
      std::make_shared<nn::LayerNorm>(32), std::make_shared<nn::GELU>(), drop2,
      std::make_shared<nn::Linear>(32, 4));
  model->train();

  optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  auto warmup = std::make_shared<optim::LinearLR>(opt, 0.1, 1.0, 5);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, 35);
  optim::SequentialLR sched(opt, {warmup, cosine}, {5});

  const auto [data_x, data_y] = make_dataset();
  data::DataLoader<Batch> loader(96, {.batch_size = 16, .shuffle = true, .seed = 99},
                                 [x = data_x, y = data_y](const std::vector<int64_t>& idx) {
                                   Tensor i = from_vector<int64_t>(
                                       idx, {static_cast<int64_t>(idx.size())});
                                   return Batch{index_select(x, 0, i), index_select(y, 0, i)};
                                 });

  auto make_checkpoint = [&](int64_t step) {
    io::Checkpoint ck;
    ck.put_section("model", model->state_dict());
    ck.put_section("optimizer", opt.state_dict());
    ck.put_section("scheduler", sched.state_dict());
    ck.set("step", step);
    ck.set("program", "resume_mlp");
    io::save_generator(ck, "dropout", dropout_gen);
    const data::LoaderCursor c = loader.cursor();
    io::save_loader_position(ck, "train", {c.epoch, c.batch});
    return ck;
  };

  int64_t start = 0;
  if (!args.resume.empty()) {
    const io::Checkpoint ck = io::Checkpoint::load(args.resume);
    model->load_state_dict(ck.section("model"));
    opt.load_state_dict(ck.section("optimizer"));
    sched.load_state_dict(ck.section("scheduler"));
    io::load_generator(ck, "dropout", dropout_gen);
    const io::LoaderPosition pos = io::load_loader_position(ck, "train");
    loader.restore({pos.epoch, pos.batch});
    start = ck.get_int("step");
  }

  for (int64_t step = start; step < args.steps; ++step) {
    std::optional<Batch> batch = loader.next();
    if (!batch) {
      loader.next_epoch();
      batch = loader.next();
    }
    opt.zero_grad();
    Tensor loss = cross_entropy((*model)(batch->x), batch->y);
    loss.backward();
    const double norm = optim::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    sched.step();
    std::printf("step %lld loss %s norm %s\n", static_cast<long long>(step),
                fmt::format("{:a}", loss.item()).c_str(), fmt::format("{:a}", norm).c_str());
    std::fflush(stdout);
    if (step == args.kill_at) std::raise(SIGKILL);
    if (!args.save.empty() && (step + 1) % args.save_every == 0)
      make_checkpoint(step + 1).save(args.save);
  }
  if (!args.final_path.empty()) make_checkpoint(std::max(start, args.steps)).save(args.final_path);
  std::printf("checksum %016llx\n", static_cast<unsigned long long>(checksum(model->state_dict())));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resume_mlp: %s\n", e.what());
    return 1;
  }
}
