// optim against PyTorch (fixtures from tests/fixtures/gen_optim.py): every schedule's learning
// rates over 100 epochs (1e-12), and 20 training steps of a 3-layer MLP with SGD, Adam, AMSGrad and
// AdamW + warm-up/cosine schedule + grad-norm clipping: losses and final parameters within 1e-10
// in float64, 1e-5 + 1e-4 relative in float32.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;

namespace {

const io::SafetensorsFile& fx() { return test::fixture("optim"); }

using MakeSchedule = std::function<std::shared_ptr<LRScheduler>(Optimizer&)>;

// Two groups (lr 0.1 and 0.02); returns the (100, 2) lrs at epochs 0..99.
Tensor run_schedule(const MakeSchedule& make, const Tensor* metrics = nullptr,
                    const PlateauOptions* plateau = nullptr) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({3}).requires_grad_();
  SGD opt(std::vector<ParamGroup>{ParamGroup{{a}, 0.1}, ParamGroup{{b}, 0.02}}, {.lr = 0.1});
  std::shared_ptr<LRScheduler> sched;
  std::unique_ptr<ReduceLROnPlateau> on_plateau;
  if (plateau)
    on_plateau = std::make_unique<ReduceLROnPlateau>(opt, *plateau);
  else
    sched = make(opt);
  std::vector<double> lrs;
  std::vector<double> m = metrics ? metrics->to_vector<double>() : std::vector<double>();
  for (size_t epoch = 0; epoch < 100; ++epoch) {
    for (auto& g : opt.param_groups()) lrs.push_back(g.lr);
    opt.step();
    if (on_plateau)
      on_plateau->step(m[epoch]);
    else
      sched->step();
  }
  return from_vector<double>(lrs, {100, 2});
}

void check_schedule(const std::string& name, const MakeSchedule& make) {
  INFO("schedule " << name);
  CHECK_CLOSE(run_schedule(make), fx().at("sched." + name), 1e-12, 1e-12);
}

const std::vector<std::string> kParams = {"0.weight", "0.bias",   "2.weight",
                                          "2.bias",   "4.weight", "4.bias"};

std::shared_ptr<nn::Sequential> make_mlp(DType dt) {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(6, 16, true, dt), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(16, 16, true, dt), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3, true, dt));
}

void check_training(const std::string& cfg, DType dt) {
  const std::string sfx = dt == kFloat64 ? "" : "_f32";
  const double atol = dt == kFloat64 ? 1e-10 : 1e-5, rtol = dt == kFloat64 ? 1e-10 : 1e-4;
  INFO("config " << cfg << ", " << dtype_name(dt));
  auto model = make_mlp(dt);
  nn::StateDict init;
  for (const auto& k : kParams) init.emplace_back(k, fx().at("mlp.init." + k));
  model->load_state_dict(init);
  Tensor x = fx().at("mlp.x").to(dt), y = fx().at("mlp.y").to(dt);

  std::unique_ptr<Optimizer> opt;
  std::shared_ptr<LRScheduler> sched;
  if (cfg == "sgd") {
    opt = std::make_unique<SGD>(
        model->parameters(),
        SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  } else if (cfg == "adam") {
    opt =
        std::make_unique<Adam>(model->parameters(), AdamOptions{.lr = 1e-2, .weight_decay = 1e-4});
  } else if (cfg == "amsgrad") {
    opt = std::make_unique<Adam>(model->parameters(), AdamOptions{.lr = 1e-2, .amsgrad = true});
  } else {
    opt = std::make_unique<AdamW>(model->parameters(),
                                  AdamWOptions{.lr = 1e-2, .weight_decay = 0.01});
    auto warmup = std::make_shared<LinearLR>(*opt, 0.2, 1.0, 5);
    auto cosine = std::make_shared<CosineAnnealingLR>(*opt, 15);
    sched = std::make_shared<SequentialLR>(
        *opt, std::vector<std::shared_ptr<LRScheduler>>{warmup, cosine}, std::vector<int64_t>{5});
  }
  std::vector<double> losses, norms;
  for (int step = 0; step < 20; ++step) {
    opt->zero_grad();
    Tensor d = sub((*model)(x), y);
    Tensor loss = mean(mul(d, d));
    loss.backward();
    losses.push_back(loss.item());
    if (sched) norms.push_back(clip_grad_norm_(model->parameters(), 1.0));
    opt->step();
    if (sched) sched->step();
  }
  CHECK_CLOSE(from_vector<double>(losses, {20}), fx().at(cfg + ".loss" + sfx), atol, rtol);
  if (sched)
    CHECK_CLOSE(from_vector<double>(norms, {20}), fx().at(cfg + ".norm" + sfx), atol, rtol);
  for (const auto& [k, t] : model->state_dict()) {
    INFO("parameter " << k);
    CHECK_CLOSE(t, fx().at(cfg + ".final" + sfx + "." + k), atol, rtol);
  }
}

}  // namespace

TEST_CASE("parity: LR schedules over 100 epochs", "[optim][parity]") {
  check_schedule("step", [](Optimizer& o) { return std::make_shared<StepLR>(o, 7, 0.5); });
  check_schedule("multistep", [](Optimizer& o) {
    return std::make_shared<MultiStepLR>(o, std::vector<int64_t>{10, 25, 25, 60}, 0.3);
  });
  check_schedule("exponential",
                 [](Optimizer& o) { return std::make_shared<ExponentialLR>(o, 0.95); });
  check_schedule("cosine",
                 [](Optimizer& o) { return std::make_shared<CosineAnnealingLR>(o, 30, 0.001); });
  check_schedule("linear",
                 [](Optimizer& o) { return std::make_shared<LinearLR>(o, 0.25, 1.0, 10); });
  check_schedule("linear_decay",
                 [](Optimizer& o) { return std::make_shared<LinearLR>(o, 1.0, 0.1, 40); });
  check_schedule("sequential", [](Optimizer& o) {
    std::vector<std::shared_ptr<LRScheduler>> s = {std::make_shared<LinearLR>(o, 0.1, 1.0, 5),
                                                   std::make_shared<CosineAnnealingLR>(o, 95)};
    return std::make_shared<SequentialLR>(o, s, std::vector<int64_t>{5});
  });
  check_schedule("sequential3", [](Optimizer& o) {
    std::vector<std::shared_ptr<LRScheduler>> s = {std::make_shared<LinearLR>(o, 0.5, 1.0, 10),
                                                   std::make_shared<StepLR>(o, 9, 0.7),
                                                   std::make_shared<ExponentialLR>(o, 0.9)};
    return std::make_shared<SequentialLR>(o, s, std::vector<int64_t>{10, 50});
  });
  check_schedule("onecycle", [](Optimizer& o) {
    return std::make_shared<OneCycleLR>(o, std::vector<double>{1.0, 0.5}, 100);
  });
  check_schedule("onecycle3", [](Optimizer& o) {
    return std::make_shared<OneCycleLR>(o, 0.8, 100,
                                        OneCycleOptions{.pct_start = 0.25,
                                                        .anneal_strategy = AnnealStrategy::Linear,
                                                        .div_factor = 10,
                                                        .final_div_factor = 100,
                                                        .three_phase = true});
  });
}

TEST_CASE("parity: ReduceLROnPlateau", "[optim][parity]") {
  PlateauOptions min_opts{
      .factor = 0.5, .patience = 3, .threshold = 1e-2, .cooldown = 2, .min_lr = 0.004};
  CHECK_CLOSE(run_schedule({}, &fx().at("sched.plateau.metrics"), &min_opts),
              fx().at("sched.plateau"), 1e-12, 1e-12);
  PlateauOptions max_opts{.mode = PlateauMode::Max,
                          .factor = 0.3,
                          .patience = 5,
                          .threshold = 0.01,
                          .threshold_mode = ThresholdMode::Abs};
  CHECK_CLOSE(run_schedule({}, &fx().at("sched.plateau_max.metrics"), &max_opts),
              fx().at("sched.plateau_max"), 1e-12, 1e-12);
}

TEST_CASE("parity: MLP training with SGD, Adam, AMSGrad, AdamW + schedule + clipping",
          "[optim][parity]") {
  for (const char* cfg : {"sgd", "adam", "amsgrad", "adamw"})
    for (DType dt : {kFloat64, kFloat32}) check_training(cfg, dt);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
