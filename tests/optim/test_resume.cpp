// Resuming training from a checkpoint reproduces the uninterrupted run bit for bit.
//  - In a new process: tests/optim/resume_mlp.cpp (MLP with LayerNorm and seeded Dropout, AdamW,
//    warm-up + cosine, clipping, a shuffling DataLoader) run 40 steps straight vs 20 steps, save,
//    new process, load, 20 steps: identical losses, norms and final checkpoint bytes.
//  - After a crash: the trainer is SIGKILLed (at a fixed step and at random moments while it saves
//    every step); resuming from whatever checkpoint is on disk still gives the same run.
//  - In process: optimizer + schedule state through io::Checkpoint for SGD, Adam (AMSGrad), AdamW
//    with StepLR, OneCycleLR and ReduceLROnPlateau.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nabla/core/io/checkpoint.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

struct Run {
  int status = 0;  // waitpid status
  std::vector<std::string> lines;
  std::string err;
};

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& file) const { return (path / file).string(); }
};

// Starts resume_mlp with args, stdout/stderr into files; kill_after_us >= 0 SIGKILLs it then.
Run run_trainer(const TempDir& dir, const std::vector<std::string>& args,
                int64_t kill_after_us = -1) {
  static int counter = 0;
  const std::string out = dir / fmt::format("out{}.txt", counter);
  const std::string err = dir / fmt::format("err{}.txt", counter++);
  std::vector<std::string> all = {NABLA_RESUME_MLP};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // only async-signal-safe calls until exec
    int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) ::_exit(126);
    ::dup2(fo, 1);
    ::dup2(fe, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (kill_after_us >= 0) {
    ::usleep(static_cast<useconds_t>(kill_after_us));
    ::kill(pid, SIGKILL);
  }
  Run r;
  ::waitpid(pid, &r.status, 0);
  r.lines = read_lines(out);
  r.err = read_bytes(err);
  return r;
}

bool exited_ok(const Run& r) { return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }

// "step i ..." lines only.
std::vector<std::string> step_lines(const Run& r) {
  std::vector<std::string> out;
  for (const auto& l : r.lines)
    if (l.rfind("step ", 0) == 0) out.push_back(l);
  return out;
}

std::vector<std::string> slice(const std::vector<std::string>& v, size_t begin, size_t end) {
  return {v.begin() + static_cast<int64_t>(begin), v.begin() + static_cast<int64_t>(end)};
}

}  // namespace

TEST_CASE("resume: 20 steps + checkpoint + new process + 20 steps == 40 steps, bit for bit",
          "[optim][resume]") {
  TempDir dir("nabla_resume");
  Run straight = run_trainer(dir, {"--steps", "40", "--final", dir / "straight.st"});
  INFO(straight.err);
  REQUIRE(exited_ok(straight));
  const auto all = step_lines(straight);
  REQUIRE(all.size() == 40);
  CHECK(all[0].rfind("step 0 loss 0x", 0) == 0);
  CHECK(all[39].rfind("step 39 loss 0x", 0) == 0);
  CHECK(straight.lines.back().rfind("checksum ", 0) == 0);

  Run first = run_trainer(dir, {"--steps", "20", "--save", dir / "ck.st", "--save-every", "20"});
  INFO(first.err);
  REQUIRE(exited_ok(first));
  {
    // The step-20 checkpoint holds everything the run needs, mid-epoch (6 batches per epoch).
    io::Checkpoint ck = io::Checkpoint::load(dir / "ck.st");
    CHECK(ck.section_names() == std::vector<std::string>{"model", "optimizer", "scheduler"});
    CHECK(ck.get_int("step") == 20);
    CHECK(ck.get_string("program") == "resume_mlp");
    const io::LoaderPosition pos = io::load_loader_position(ck, "train");
    CHECK(pos.epoch == 3);
    CHECK(pos.batch == 2);
    CHECK(ck.get_uint("generator.dropout.seed") == 7);
    CHECK(ck.get_uint("generator.dropout.offset") > 0);
    CHECK(ck.section("model").size() == 10);
  }
  Run second =
      run_trainer(dir, {"--steps", "40", "--resume", dir / "ck.st", "--final", dir / "resumed.st"});
  INFO(second.err);
  REQUIRE(exited_ok(second));

  std::vector<std::string> joined = step_lines(first);
  for (const auto& l : step_lines(second)) joined.push_back(l);
  CHECK(joined == all);
  CHECK(first.lines.back() != straight.lines.back());  // the checksum sees the parameters
  CHECK(second.lines.back() == straight.lines.back());
  // Model, optimizer, schedule, dropout generator and loader cursor: the same bytes.
  CHECK(read_bytes(dir / "resumed.st") == read_bytes(dir / "straight.st"));

  // Resuming a checkpoint that lacks a section fails with a message, not a crash.
  io::Checkpoint partial = io::Checkpoint::load(dir / "ck.st");
  io::Checkpoint broken;
  broken.put_section("model", partial.section("model"));
  broken.set("step", 20);
  broken.save(dir / "broken.st");
  Run bad = run_trainer(dir, {"--steps", "40", "--resume", dir / "broken.st"});
  CHECK(WIFEXITED(bad.status));
  CHECK(WEXITSTATUS(bad.status) == 1);
  CHECK_THAT(bad.err, Contains("broken.st") && Contains("no section 'optimizer'"));
}

TEST_CASE("resume: a SIGKILLed trainer resumes from its last checkpoint bit for bit",
          "[optim][resume]") {
  TempDir dir("nabla_crash_resume");
  Run straight = run_trainer(dir, {"--steps", "40", "--final", dir / "straight.st"});
  REQUIRE(exited_ok(straight));
  const auto all = step_lines(straight);
  REQUIRE(all.size() == 40);
  const std::string straight_bytes = read_bytes(dir / "straight.st");

  // Resumes from whatever checkpoint is on disk (or from scratch) and checks the whole run.
  auto resume_and_check = [&](const std::string& ckpt, const Run& crashed) {
    int64_t from = 0;
    std::vector<std::string> args = {"--steps", "40", "--final", dir / "resumed.st"};
    if (fs::exists(ckpt)) {
      from = io::Checkpoint::load(ckpt).get_int("step");  // must load: never torn
      args.push_back("--resume");
      args.push_back(ckpt);
    }
    INFO("resuming from step " << from);
    // What the crashed run printed before dying is the straight run's prefix...
    const auto printed = step_lines(crashed);
    REQUIRE(printed.size() <= all.size());
    CHECK(printed == slice(all, 0, printed.size()));
    CHECK(static_cast<size_t>(from) <= printed.size());
    // ...and the resumed run continues it exactly.
    Run resumed = run_trainer(dir, args);
    INFO(resumed.err);
    REQUIRE(exited_ok(resumed));
    CHECK(step_lines(resumed) == slice(all, static_cast<size_t>(from), all.size()));
    CHECK(resumed.lines.back() == straight.lines.back());
    CHECK(read_bytes(dir / "resumed.st") == straight_bytes);
  };

  SECTION("killed at step 23, checkpoints every 3 steps") {
    const std::string ckpt = dir / "every3.st";
    Run crashed =
        run_trainer(dir, {"--steps", "40", "--save", ckpt, "--save-every", "3", "--kill-at", "23"});
    REQUIRE(WIFSIGNALED(crashed.status));
    CHECK(WTERMSIG(crashed.status) == SIGKILL);
    CHECK(step_lines(crashed).size() == 24);
    CHECK(io::Checkpoint::load(ckpt).get_int("step") == 21);
    resume_and_check(ckpt, crashed);
  }
  SECTION("killed at random moments while checkpointing every step") {
    // An uninterrupted run that checkpoints every step: same result, and its duration.
    const auto t0 = std::chrono::steady_clock::now();
    Run full = run_trainer(dir, {"--steps", "40", "--save", dir / "full.st", "--save-every", "1",
                                 "--final", dir / "full_final.st"});
    const auto wall_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    REQUIRE(exited_ok(full));
    CHECK(step_lines(full) == all);
    CHECK(read_bytes(dir / "full_final.st") == straight_bytes);
    Generator gen(31);
    for (int trial = 0; trial < 3; ++trial) {
      const std::string ckpt = dir / fmt::format("random{}.st", trial);
      // Spread the kills over the run (the timing only chooses where; any outcome must resume).
      const auto delay = static_cast<int64_t>(gen.bits64(static_cast<uint64_t>(trial)) %
                                              static_cast<uint64_t>(wall_us + 1));
      Run crashed = run_trainer(dir, {"--steps", "40", "--save", ckpt, "--save-every", "1"}, delay);
      INFO("trial " << trial << ", killed after " << delay << " us");
      resume_and_check(ckpt, crashed);
    }
  }
}

namespace {

// Trains a tiny model for `steps` steps with the given optimizer and schedule callbacks.
struct Tiny {
  Tensor w = zeros({3, 2}, kFloat64).requires_grad_();
  Tensor b = zeros({2}, kFloat64).requires_grad_();
  Tensor x, y;
  Tiny() {
    Generator g(5);
    x = randn({8, 3}, g, kFloat64);
    y = randn({8, 2}, g, kFloat64);
    NoGradGuard no_grad;
    w.copy_(randn({3, 2}, g, kFloat64));
  }
  double step(Optimizer& opt) {
    opt.zero_grad();
    Tensor loss = mse_loss(add(matmul(x, w), b), y);
    loss.backward();
    opt.step();
    return loss.item();
  }
};

using MakeOpt = std::function<std::unique_ptr<Optimizer>(Tiny&)>;
using MakeSched = std::function<std::shared_ptr<LRScheduler>(Optimizer&)>;

// 6 steps, checkpoint, 6 more steps vs a fresh model/optimizer/schedule loaded from the
// checkpoint doing the same 6 steps: identical losses, parameters and optimizer state.
void check_in_process_resume(const MakeOpt& make_opt, const MakeSched& make_sched,
                             bool plateau = false) {
  Tiny a;
  auto opt_a = make_opt(a);
  std::shared_ptr<LRScheduler> sched_a = make_sched ? make_sched(*opt_a) : nullptr;
  auto plateau_a = plateau ? std::make_unique<ReduceLROnPlateau>(
                                 *opt_a, PlateauOptions{.factor = 0.5, .patience = 0})
                           : nullptr;
  auto advance = [](Tiny& t, Optimizer& o, LRScheduler* s, ReduceLROnPlateau* p) {
    const double loss = t.step(o);
    if (s) s->step();
    if (p) p->step(loss);
    return loss;
  };
  for (int i = 0; i < 6; ++i) advance(a, *opt_a, sched_a.get(), plateau_a.get());

  io::Checkpoint ck;
  ck.put_section("model", {{"w", a.w}, {"b", a.b}});
  ck.put_section("optimizer", opt_a->state_dict());
  if (sched_a) ck.put_section("scheduler", sched_a->state_dict());
  if (plateau_a) ck.put_section("plateau", plateau_a->state_dict());
  const io::Checkpoint r = io::Checkpoint::parse(ck.serialize(), "mem");

  Tiny b;
  auto opt_b = make_opt(b);
  std::shared_ptr<LRScheduler> sched_b = make_sched ? make_sched(*opt_b) : nullptr;
  auto plateau_b = plateau ? std::make_unique<ReduceLROnPlateau>(
                                 *opt_b, PlateauOptions{.factor = 0.5, .patience = 0})
                           : nullptr;
  {
    NoGradGuard no_grad;
    b.w.copy_(r.section("model")[0].second);
    b.b.copy_(r.section("model")[1].second);
  }
  opt_b->load_state_dict(r.section("optimizer"));
  if (sched_b) sched_b->load_state_dict(r.section("scheduler"));
  if (plateau_b) plateau_b->load_state_dict(r.section("plateau"));

  for (int i = 0; i < 6; ++i) {
    const double la = advance(a, *opt_a, sched_a.get(), plateau_a.get());
    const double lb = advance(b, *opt_b, sched_b.get(), plateau_b.get());
    CHECK(la == lb);
    CHECK(opt_a->param_groups()[0].lr == opt_b->param_groups()[0].lr);
  }
  CHECK(a.w.to_vector<double>() == b.w.to_vector<double>());
  CHECK(a.b.to_vector<double>() == b.b.to_vector<double>());
  const NamedTensors sa = opt_a->state_dict(), sb = opt_b->state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sa[i].first == sb[i].first);
    CHECK(sa[i].second.to(kFloat64).to_vector<double>() ==
          sb[i].second.to(kFloat64).to_vector<double>());
  }
}

}  // namespace

TEST_CASE("resume: optimizer and schedule state through io::Checkpoint", "[optim][resume]") {
  SECTION("SGD nesterov + StepLR") {
    check_in_process_resume(
        [](Tiny& t) {
          return std::make_unique<SGD>(
              std::vector<Tensor>{t.w, t.b},
              SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
        },
        [](Optimizer& o) { return std::make_shared<StepLR>(o, 4, 0.5); });
  }
  SECTION("Adam AMSGrad + OneCycleLR") {
    check_in_process_resume(
        [](Tiny& t) {
          return std::make_unique<Adam>(std::vector<Tensor>{t.w, t.b},
                                        AdamOptions{.lr = 0.01, .amsgrad = true});
        },
        [](Optimizer& o) { return std::make_shared<OneCycleLR>(o, 0.05, 20); });
  }
  SECTION("AdamW, two groups, + ReduceLROnPlateau") {
    check_in_process_resume(
        [](Tiny& t) {
          return std::make_unique<AdamW>(
              std::vector<ParamGroup>{ParamGroup{{t.w}, 0.02}, ParamGroup{{t.b}, 0.01, 0.0}},
              AdamWOptions{.lr = 0.01});
        },
        nullptr, /*plateau=*/true);
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
