// The gradient report (nn::GradientMonitor): gradient norms, update/weight ratios, and for a
// parameter without a gradient the place its path was cut: detach, NoGradGuard, a
// non-differentiable op (argmax, an integer cast), or never used; and the first non-finite
// gradient in engine order for a planted log(0).
#include "nabla/nn/inspect.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using Reason = inspect::NoGradientReason;

namespace {

// Detaches its input inside its own forward (a cut inside a child module).
class Cutter : public nn::Module {
 public:
  Cutter() : nn::Module("Cutter") {}
  Tensor forward(const Tensor& x) const { return x.detach(); }
  Tensor operator()(const Tensor& x) const { return call(&Cutter::forward, x); }
};

// One parameter per way a path can end, and one that trains normally.
class FourWays : public nn::Module {
 public:
  FourWays() : nn::Module("FourWays") {
    ok = register_parameter("ok", full({3}, 0.5, kFloat64));
    detached = register_parameter("detached", full({3}, 1.0, kFloat64));
    no_grad = register_parameter("no_grad", full({3}, 2.0, kFloat64));
    argmaxed = register_parameter("argmaxed", tensor({1.0, 3.0, 2.0}, kFloat64));
    cast = register_parameter("cast", full({3}, 4.0, kFloat64));
    unused = register_parameter("unused", full({3}, 5.0, kFloat64));
    discarded = register_parameter("discarded", full({3}, 6.0, kFloat64));
    frozen = register_parameter("frozen", full({3}, 7.0, kFloat64), /*requires_grad=*/false);
    cutter = register_module("cutter", std::make_shared<Cutter>());
  }
  Tensor forward(const Tensor& x) const {
    Tensor a = (*cutter)(mul(x, detached));
    Tensor b;
    {
      NoGradGuard guard;
      b = tanh(no_grad);
    }
    Tensor c = argmax(mul(x, argmaxed)).to(kFloat64);
    Tensor d = mul(x, cast).to(kInt64).to(kFloat64);
    Tensor unseen = mul(discarded, 2.0);  // computed, then dropped
    return sum(mul(add(add(add(mul(x, ok), a), b), d), add(c, frozen)));
  }
  Tensor operator()(const Tensor& x) const { return call(&FourWays::forward, x); }
  Tensor ok, detached, no_grad, argmaxed, cast, unused, discarded, frozen;
  std::shared_ptr<Cutter> cutter;
};

}  // namespace

TEST_CASE("gradient report names the cutting op of every parameter without a gradient",
          "[nn][inspect]") {
  FourWays model;
  Tensor x = tensor({1.0, -2.0, 0.5}, kFloat64);
  nn::GradientMonitor monitor(model);
  Tensor loss = model(x);
  loss.backward();
  inspect::GradientReport report = monitor.report();
  INFO(report.to_string());

  const auto& ok = report.at("ok");
  CHECK(ok.has_grad);
  CHECK_FALSE(ok.why);
  CHECK(ok.grad_norm == Approx(inspect::l2_norm(model.ok.grad())));

  const auto& detached = report.at("detached").why;
  REQUIRE(detached);
  CHECK(detached->kind == Reason::Kind::Cut);
  CHECK(detached->cut == inspect::CutKind::Detach);
  CHECK(detached->scope == "cutter");
  CHECK_THAT(detached->describe(), Contains("detach()") && Contains("module 'cutter'"));

  const auto& no_grad = report.at("no_grad").why;
  REQUIRE(no_grad);
  CHECK(no_grad->cut == inspect::CutKind::NoGrad);
  CHECK(no_grad->op == "tanh");
  CHECK(no_grad->has_scope);
  CHECK(no_grad->scope.empty());  // the root module's forward
  CHECK_THAT(no_grad->describe(), Contains("'tanh'") && Contains("NoGradGuard"));

  const auto& argmaxed = report.at("argmaxed").why;
  REQUIRE(argmaxed);
  CHECK(argmaxed->cut == inspect::CutKind::NonDifferentiable);
  CHECK(argmaxed->op == "argmax");

  const auto& cast = report.at("cast").why;
  REQUIRE(cast);
  CHECK(cast->cut == inspect::CutKind::NonDifferentiable);
  CHECK(cast->op == "to(int64)");

  const auto& unused = report.at("unused").why;
  REQUIRE(unused);
  CHECK(unused->kind == Reason::Kind::NeverUsed);
  CHECK_THAT(unused->describe(), Contains("never used"));

  const auto& discarded = report.at("discarded").why;
  REQUIRE(discarded);
  CHECK(discarded->kind == Reason::Kind::NotReached);
  CHECK(discarded->op == "mul");

  REQUIRE(report.at("frozen").why);
  CHECK(report.at("frozen").why->kind == Reason::Kind::Frozen);
  CHECK_FALSE(report.first_non_finite);
  CHECK_THAT(report.to_string(), Contains("argmaxed") && Contains("'argmax'"));
}

TEST_CASE("gradient report: update/weight ratio after an optimizer step", "[nn][inspect]") {
  nn::Linear lin(3, 2, true, kFloat64);
  optim::SGD sgd(lin.parameters(), {/*lr=*/0.1});
  nn::GradientMonitor monitor(lin);
  sum(lin(tensor({{1.0, 2.0, 3.0}}, kFloat64))).backward();
  CHECK_FALSE(monitor.report().at("weight").update_ratio);
  monitor.snapshot_before_step();
  CHECK_FALSE(inspect::recording_cuts());  // recording stopped before the step
  const Tensor w_before = lin.weight().detach().clone();
  const double grad_norm = inspect::l2_norm(lin.weight().grad());
  sgd.step();
  inspect::GradientReport report = monitor.report();
  // SGD: |w - w_before| = lr |grad|.
  REQUIRE(report.at("weight").update_ratio);
  CHECK(*report.at("weight").update_ratio == Approx(0.1 * grad_norm / inspect::l2_norm(w_before)));
  CHECK(report.at("weight").grad_norm == Approx(grad_norm));
  CHECK(report.at("bias").update_ratio);
}

TEST_CASE("gradient report: a planted log(0) names the first non-finite node", "[nn][inspect]") {
  class LogModel : public nn::Module {
   public:
    LogModel() : nn::Module("LogModel") {
      proj = register_module("proj", std::make_shared<nn::Linear>(2, 2, false, kFloat64));
      NoGradGuard no_grad;
      Tensor w = proj->weight();
      w.copy_(tensor({{1.0, 0.0}, {0.0, 1.0}}, kFloat64));
    }
    Tensor forward(const Tensor& x) const { return sum(mul(log((*proj)(x)), 3.0)); }
    Tensor operator()(const Tensor& x) const { return call(&LogModel::forward, x); }
    std::shared_ptr<nn::Linear> proj;
  };
  LogModel model;
  Tensor x = tensor({{0.0, 1.0}}, kFloat64);  // proj(x) = x: log(0) = -inf
  nn::GradientMonitor monitor(model);
  model(x).backward();  // no throw: the report records, AnomalyMode is off
  inspect::GradientReport report = monitor.report();
  INFO(report.to_string());
  REQUIRE(report.first_non_finite);
  CHECK(report.first_non_finite->node == "LogBackward");
  CHECK(report.first_non_finite->forward_op == "log");
  CHECK(report.first_non_finite->has_scope);
  CHECK(report.first_non_finite->scope.empty());  // log ran in the root module's forward
  CHECK(report.first_non_finite->shape == Shape{1, 2});
  CHECK_FALSE(report.at("proj.weight").finite);
  CHECK_THAT(report.to_string(), Contains("LogBackward") && Contains("'log'"));

  // AnomalyMode still throws, and now names the module scope too.
  nn::RecordScopes scopes(model);
  Tensor loss = model(x);
  AnomalyGuard anomaly;
  CHECK_THROWS_WITH(loss.backward(), Contains("LogBackward") && Contains("module '<root>'"));
}

TEST_CASE("gradient report: off by default, nothing is recorded without a monitor",
          "[nn][inspect]") {
  CHECK_FALSE(inspect::recording_cuts());
  CHECK_FALSE(inspect::recording_non_finite());
  FourWays model;
  Tensor loss = model(tensor({1.0, 2.0, 3.0}, kFloat64));
  CHECK(loss.grad_fn()->module_scope == nullptr);
  {
    nn::GradientMonitor monitor(model);
    CHECK(inspect::recording_cuts());
    monitor.stop();
    CHECK_FALSE(inspect::recording_cuts());
  }
  // Without a recorder the report still gives norms, and no reason beyond "never used".
  loss.backward();
  inspect::GradientReport report = inspect::gradient_report(model.named_parameters());
  CHECK(report.at("ok").has_grad);
  REQUIRE(report.at("detached").why);
  CHECK(report.at("detached").why->kind == Reason::Kind::NeverUsed);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
