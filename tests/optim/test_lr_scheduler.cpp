// LR schedules: small hand-checked sequences (PyTorch's docstring examples), validation, the
// plateau logic, and state_dict round trips. Full 100-epoch parity is in test_parity_optim.cpp.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;
using Catch::Matchers::Contains;

namespace {

// Learning rates of group 0 at epochs 0..n-1.
std::vector<double> lrs(Optimizer& opt, LRScheduler& s, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(opt.param_groups()[0].lr);
    CHECK(s.get_last_lr()[0] == opt.param_groups()[0].lr);
    s.step();
  }
  return out;
}

std::vector<Tensor> one_param() { return {zeros({2}).requires_grad_()}; }

void check_seq(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("epoch " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("LR schedules: hand-checked sequences", "[optim]") {
  auto params = one_param();
  SECTION("StepLR") {
    SGD opt(params, {.lr = 1.0});
    StepLR s(opt, 2, 0.5);
    check_seq(lrs(opt, s, 6), {1, 1, 0.5, 0.5, 0.25, 0.25});
    CHECK(opt.param_groups()[0].initial_lr == 1.0);
  }
  SECTION("MultiStepLR counts a repeated milestone twice") {
    SGD opt(params, {.lr = 1.0});
    MultiStepLR s(opt, {4, 2, 4}, 0.1);
    check_seq(lrs(opt, s, 6), {1, 1, 0.1, 0.1, 0.001, 0.001});
  }
  SECTION("ExponentialLR") {
    SGD opt(params, {.lr = 2.0});
    ExponentialLR s(opt, 0.5);
    check_seq(lrs(opt, s, 4), {2, 1, 0.5, 0.25});
  }
  SECTION("LinearLR (PyTorch's docstring example)") {
    SGD opt(params, {.lr = 0.05});
    LinearLR s(opt, 0.5, 1.0, 4);
    check_seq(lrs(opt, s, 6), {0.025, 0.03125, 0.0375, 0.04375, 0.05, 0.05});
  }
  SECTION("CosineAnnealingLR reaches eta_min at T_max and comes back") {
    SGD opt(params, {.lr = 1.0});
    CosineAnnealingLR s(opt, 2, 0.0);
    check_seq(lrs(opt, s, 5), {1, 0.5, 0, 0.5, 1});
  }
  SECTION("SequentialLR: LinearLR warm-up then ExponentialLR") {
    SGD opt(params, {.lr = 1.0});
    auto warm = std::make_shared<LinearLR>(opt, 0.1, 1.0, 2);
    auto decay = std::make_shared<ExponentialLR>(opt, 0.9);
    SequentialLR s(opt, {warm, decay}, {2});
    check_seq(lrs(opt, s, 5), {0.1, 0.55, 1.0, 0.9, 0.81});
  }
  SECTION("OneCycleLR starts at max_lr / div_factor, peaks, ends near max_lr / div / final_div") {
    SGD opt(params, {.lr = 123.0});
    OneCycleLR s(opt, 1.0, 10, {.pct_start = 0.5, .div_factor = 4, .final_div_factor = 10});
    std::vector<double> v = lrs(opt, s, 10);
    CHECK(v[0] == 0.25);
    CHECK(v[4] == Approx(1.0));
    CHECK(v[9] == Approx(0.025));
    CHECK(s.last_epoch() == 10);  // the last allowed step (PyTorch: step_num > total_steps throws)
    CHECK_THROWS_WITH(s.step(), Contains("OneCycleLR") && Contains("total_steps is 10"));
  }
}

TEST_CASE("LR schedules: validation", "[optim]") {
  auto params = one_param();
  SGD opt(params, {.lr = 1.0});
  CHECK_THROWS_WITH(StepLR(opt, 0), Contains("StepLR") && Contains("step_size"));
  CHECK_THROWS_AS(CosineAnnealingLR(opt, 0), ValueError);
  CHECK_THROWS_WITH(LinearLR(opt, 0.0), Contains("start_factor"));
  CHECK_THROWS_WITH(OneCycleLR(opt, std::vector<double>{1, 2}, 10), Contains("one per group"));
  CHECK_THROWS_WITH(OneCycleLR(opt, 1.0, 10, {.pct_start = 0.1}), Contains("zero length"));
  CHECK_THROWS_AS(ReduceLROnPlateau(opt, {.factor = 1.0}), ValueError);
  auto a = std::make_shared<StepLR>(opt, 3);
  CHECK_THROWS_WITH(SequentialLR(opt, {a}, {3}), Contains("one milestone fewer"));
  SGD other(one_param(), {.lr = 1.0});
  auto b = std::make_shared<StepLR>(other, 3);
  CHECK_THROWS_WITH(SequentialLR(opt, {a, b}, {3}), Contains("different optimizer"));
}

TEST_CASE("ReduceLROnPlateau: patience, cooldown, min_lr", "[optim]") {
  auto params = one_param();
  SGD opt(params, {.lr = 1.0});
  ReduceLROnPlateau s(opt, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.2});
  std::vector<double> seen;
  for (double m : {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}) {
    s.step(m);
    seen.push_back(opt.param_groups()[0].lr);
  }
  // epoch 1 best; 2 bad; 3 bad -> reduce (cooldown 1); 4 in cooldown; 5 bad; 6 bad -> reduce ...
  check_seq(seen, {1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25});
  s.step(1.0);
  s.step(1.0);
  CHECK(opt.param_groups()[0].lr == 0.2);  // clamped at min_lr
  CHECK(s.get_last_lr()[0] == 0.2);
  s.step(0.5);  // an improvement resets the count
  CHECK(s.last_epoch() == 11);
}

TEST_CASE("LR schedules: state_dict round trip and errors", "[optim]") {
  auto params = one_param();
  SGD opt(params, {.lr = 1.0});
  CosineAnnealingLR s(opt, 7, 0.01);
  for (int i = 0; i < 3; ++i) s.step();
  NamedTensors sd = s.state_dict();
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i) {
    s.step();
    expected.push_back(opt.param_groups()[0].lr);
  }
  s.load_state_dict(sd);
  CHECK(s.last_epoch() == 3);
  for (int i = 0; i < 4; ++i) {
    s.step();
    CHECK(opt.param_groups()[0].lr == expected[static_cast<size_t>(i)]);
  }
  NamedTensors bad = sd;
  bad.emplace_back("extra", zeros({1}));
  CHECK_THROWS_WITH(s.load_state_dict(bad), Contains("unexpected key 'extra'"));
  bad = sd;
  bad[0].second = zeros({}, kFloat64);  // last_epoch must be int64
  CHECK_THROWS_WITH(s.load_state_dict(bad), Contains("'last_epoch'") && Contains("int64"));
  bad = sd;
  bad[2].second = zeros({3}, kFloat64);  // base_lrs: one per group
  CHECK_THROWS_WITH(s.load_state_dict(bad), Contains("base_lrs") && Contains("(3,)"));

  ReduceLROnPlateau p(opt, {.patience = 0});
  p.step(1.0);
  p.step(2.0);
  NamedTensors psd = p.state_dict();
  const double lr = opt.param_groups()[0].lr;
  p.step(3.0);
  p.load_state_dict(psd);
  CHECK(opt.param_groups()[0].lr == lr);
  CHECK(p.last_epoch() == 2);
  CHECK_THROWS_WITH(p.load_state_dict({}), Contains("missing key 'best'"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
