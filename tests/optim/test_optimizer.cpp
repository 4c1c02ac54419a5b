// Optimizers: hand-computed updates, groups, skipping, zero_grad, validation, and the state_dict:
// a resumed run (fresh model, optimizer and schedule restored from a safetensors round trip) is
// bitwise identical to the uninterrupted one.
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;
using Catch::Matchers::Contains;

namespace {

Tensor vec(std::vector<double> v, DType dt = kFloat64) {
  return from_vector<double>(v, {static_cast<int64_t>(v.size())}).to(dt);
}

Tensor param(std::vector<double> v, DType dt = kFloat64) { return vec(v, dt).requires_grad_(); }

void set_grad(Tensor& p, std::vector<double> g) { p.set_grad(vec(g, p.dtype())); }

}  // namespace

TEST_CASE("SGD: plain, momentum with dampening, nesterov, weight decay", "[optim]") {
  SECTION("plain") {
    Tensor p = param({1, 2});
    SGD opt({p}, {.lr = 0.1});
    set_grad(p, {0.5, -1});
    opt.step();
    CHECK_CLOSE(p, vec({0.95, 2.1}), 1e-15, 0);
    CHECK(opt.state(0).empty());
  }
  SECTION("momentum, dampening, weight decay: two steps") {
    Tensor p = param({1.0});
    SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
    set_grad(p, {0.5});
    opt.step();  // d = 0.5 + 0.01 = 0.51; buf = d (no dampening on the first step)
    double pv = 1.0 - 0.1 * 0.51, buf = 0.51;
    CHECK_CLOSE(p, vec({pv}), 1e-15, 0);
    opt.step();
    const double d = 0.5 + 0.01 * pv;
    buf = 0.9 * buf + 0.9 * d;
    pv -= 0.1 * buf;
    CHECK_CLOSE(p, vec({pv}), 1e-15, 0);
    CHECK_CLOSE(opt.state(0).at("momentum_buffer"), vec({buf}), 1e-15, 0);
  }
  SECTION("nesterov") {
    Tensor p = param({1.0}, kFloat32);
    SGD opt({p}, {.lr = 0.1, .momentum = 0.5, .nesterov = true});
    set_grad(p, {2.0});
    opt.step();  // buf = 2; d = 2 + 0.5 * 2 = 3
    CHECK_CLOSE(p, vec({0.7}), 1e-7, 0);
    opt.step();  // buf = 1 + 2 = 3; d = 2 + 1.5 = 3.5
    CHECK_CLOSE(p, vec({0.35}), 1e-6, 0);
  }
}

TEST_CASE("Adam and AdamW: first steps by hand", "[optim]") {
  SECTION("Adam: step 1 moves every element by lr * g / (|g| + eps)") {
    Tensor p = param({1, -2, 3});
    Adam opt({p}, {.lr = 0.01});
    set_grad(p, {0.3, -4, 1e-3});
    opt.step();
    auto expected = [](double p0, double g) { return p0 - 0.01 * g / (std::abs(g) + 1e-8); };
    CHECK_CLOSE(p, vec({expected(1, 0.3), expected(-2, -4), expected(3, 1e-3)}), 1e-14, 0);
    CHECK(opt.state(0).at("step").item<int64_t>() == 1);
    CHECK_CLOSE(opt.state(0).at("exp_avg"), vec({0.03, -0.4, 1e-4}), 1e-15, 0);
    CHECK(!opt.state(0).count("max_exp_avg_sq"));
  }
  SECTION("Adam: L2 weight decay enters the gradient; step 2 uses bias corrections") {
    Tensor p = param({1.0});
    Adam opt({p}, {.lr = 0.1, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.1});
    set_grad(p, {1.0});
    opt.step();
    double pv = 1.0 - 0.1 * 1.1 / (1.1 + 1e-8);  // g' = 1.1: a normalised step of lr
    CHECK_CLOSE(p, vec({pv}), 1e-12, 0);
    opt.step();
    const double g1 = 1.1, g2 = 1.0 + 0.1 * pv;
    const double m = 0.5 * (0.5 * g1) + 0.5 * g2;
    const double v = 0.75 * (0.25 * g1 * g1) + 0.25 * g2 * g2;
    pv -= 0.1 / (1 - 0.25) * m / (std::sqrt(v) / std::sqrt(1 - 0.5625) + 1e-8);
    CHECK_CLOSE(p, vec({pv}), 1e-12, 0);
  }
  SECTION("AdamW: decoupled decay p *= 1 - lr * wd, then the Adam step") {
    Tensor p = param({2.0});
    AdamW opt({p}, {.lr = 0.1});  // weight_decay defaults to 1e-2
    CHECK(opt.param_groups()[0].weight_decay == 0.01);
    set_grad(p, {-3.0});
    opt.step();
    CHECK_CLOSE(p, vec({2.0 * (1 - 0.1 * 0.01) + 0.1}), 1e-8, 0);
  }
  SECTION("AMSGrad keeps the running max of v") {
    Tensor p = param({0.0});
    Adam opt({p}, {.lr = 0.1, .amsgrad = true});
    set_grad(p, {10.0});
    opt.step();
    set_grad(p, {0.0});
    opt.step();
    const Tensor& vmax = opt.state(0).at("max_exp_avg_sq");
    CHECK(vmax.item<double>() == Approx(0.001 * 100));
    CHECK(opt.state(0).at("exp_avg_sq").item<double>() < vmax.item<double>());
  }
}

TEST_CASE("Optimizer: groups, skipping params without grad, zero_grad", "[optim]") {
  Tensor a = param({1.0}), b = param({1.0}), c = param({1.0});
  SGD opt(std::vector<ParamGroup>{ParamGroup{{a}, 0.5}, ParamGroup{{b, c}}}, {.lr = 0.1});
  CHECK(opt.param_groups()[0].lr == 0.5);
  CHECK(opt.param_groups()[1].lr == 0.1);  // the default
  CHECK(opt.num_params() == 3);
  set_grad(a, {1.0});
  set_grad(b, {1.0});
  opt.step();
  CHECK(a.item<double>() == 0.5);
  CHECK(b.item<double>() == 0.9);
  CHECK(c.item<double>() == 1.0);  // no grad: skipped
  opt.zero_grad(/*set_to_none=*/false);
  CHECK(a.grad().defined());
  CHECK(a.grad().item<double>() == 0.0);
  CHECK(!c.grad().defined());
  opt.zero_grad();
  CHECK(!a.grad().defined());
  // A step bumps the parameter's version: a graph that saved it refuses to backward.
  Tensor y = mul(a, a);
  set_grad(a, {1.0});
  opt.step();
  CHECK_THROWS_AS(y.backward(), AutogradError);
}

TEST_CASE("Optimizer: invalid construction names the problem", "[optim]") {
  Tensor p = param({1.0});
  CHECK_THROWS_WITH(SGD({p}, {.lr = -1}), Contains("SGD") && Contains("learning rate"));
  CHECK_THROWS_WITH(SGD({p}, {.lr = 0.1, .nesterov = true}), Contains("nesterov"));
  CHECK_THROWS_WITH(SGD({p, p}, {.lr = 0.1}),
                    Contains("parameter 1") && Contains("more than once"));
  CHECK_THROWS_WITH(SGD(std::vector<Tensor>{}, {.lr = 0.1}), Contains("empty parameter list"));
  CHECK_THROWS_WITH(Adam({mul(p, 2.0)}, {}), Contains("not a leaf"));
  CHECK_THROWS_AS(Adam({zeros({2}, kInt64)}, {}), DTypeError);
  CHECK_THROWS_WITH(Adam({zeros({3, 2}).t()}, {}),
                    Contains("not contiguous") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(Adam({p}, {.beta1 = 1.0}), Contains("betas"));
  CHECK_THROWS_WITH(AdamW({p}, {.eps = -1}), Contains("AdamW") && Contains("eps"));
}

TEST_CASE("Optimizer: non-contiguous gradients are read through their strides", "[optim]") {
  Tensor p = zeros({2, 3}, kFloat64).requires_grad_();
  SGD opt({p}, {.lr = 1.0});
  Tensor g = from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}).t();  // (2, 3), transposed
  p.set_grad(g);
  opt.step();
  CHECK(p.to_vector<double>() == std::vector<double>{-1, -3, -5, -2, -4, -6});
}

namespace {

// One training run of a small MLP; the optimizer and schedule are built by `make`.
struct Run {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<Optimizer> opt;
  std::shared_ptr<LRScheduler> sched;
  Tensor x, y;

  Run(const std::string& kind, DType dt) {
    manual_seed(1);
    model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8, true, dt),
                                             std::make_shared<nn::Tanh>(),
                                             std::make_shared<nn::Linear>(8, 2, true, dt));
    Generator g(9);
    x = randn({16, 4}, g, dt);
    y = randn({16, 2}, g, dt);
    if (kind == "sgd")
      opt = std::make_unique<SGD>(model->parameters(),
                                  SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
    else if (kind == "amsgrad")
      opt = std::make_unique<Adam>(model->parameters(),
                                   AdamOptions{.lr = 0.01, .weight_decay = 1e-3, .amsgrad = true});
    else
      opt = std::make_unique<AdamW>(model->parameters(), AdamWOptions{.lr = 0.01});
    auto warm = std::make_shared<LinearLR>(*opt, 0.1, 1.0, 3);
    auto cosine = std::make_shared<CosineAnnealingLR>(*opt, 10);
    sched = std::make_shared<SequentialLR>(
        *opt, std::vector<std::shared_ptr<LRScheduler>>{warm, cosine}, std::vector<int64_t>{3});
  }
  void steps(int n) {
    for (int i = 0; i < n; ++i) {
      opt->zero_grad();
      Tensor d = sub((*model)(x), y);
      mean(mul(d, d)).backward();
      opt->step();
      sched->step();
    }
  }
  // model, optimizer and schedule in one named list (what a checkpoint file holds).
  NamedTensors checkpoint() const {
    NamedTensors out;
    for (auto& [k, t] : model->state_dict()) out.emplace_back("model." + k, t);
    for (auto& [k, t] : opt->state_dict()) out.emplace_back("optim." + k, t);
    for (auto& [k, t] : sched->state_dict()) out.emplace_back("sched." + k, t);
    return out;
  }
  void restore(const NamedTensors& ckpt) {
    NamedTensors m, o, s;
    for (auto& [k, t] : ckpt) {
      if (k.rfind("model.", 0) == 0) m.emplace_back(k.substr(6), t);
      if (k.rfind("optim.", 0) == 0) o.emplace_back(k.substr(6), t);
      if (k.rfind("sched.", 0) == 0) s.emplace_back(k.substr(6), t);
    }
    model->load_state_dict(m);
    opt->load_state_dict(o);
    sched->load_state_dict(s);
  }
  std::vector<double> flat_params() const {
    std::vector<double> out;
    for (auto& p : model->parameters())
      for (double v : p.to(kFloat64).to_vector<double>()) out.push_back(v);
    return out;
  }
};

}  // namespace

TEST_CASE("Optimizer state_dict: a resumed run is bitwise identical", "[optim]") {
  for (std::string kind : {"sgd", "amsgrad", "adamw"})
    for (DType dt : {kFloat64, kFloat32}) {
      INFO(kind << " " << dtype_name(dt));
      Run a(kind, dt);
      a.steps(4);
      // Through the file format: serialize and parse the checkpoint.
      std::string bytes = io::serialize_safetensors(a.checkpoint());
      a.steps(5);
      const std::vector<double> uninterrupted = a.flat_params();
      const double lr_uninterrupted = a.opt->param_groups()[0].lr;

      Run b(kind, dt);  // fresh objects, as after a restart
      b.restore(io::parse_safetensors(bytes, "checkpoint").tensors);
      b.steps(5);
      CHECK(b.flat_params() == uninterrupted);
      CHECK(b.opt->param_groups()[0].lr == lr_uninterrupted);
      CHECK(b.sched->last_epoch() == a.sched->last_epoch());

      // Restoring the same objects mid-run works too.
      a.restore(io::parse_safetensors(bytes, "checkpoint").tensors);
      a.steps(5);
      CHECK(a.flat_params() == uninterrupted);
    }
}

TEST_CASE("Optimizer state_dict: layout and load errors", "[optim]") {
  Tensor p = param({1, 2}), q = param({3});
  Adam opt(std::vector<ParamGroup>{ParamGroup{{p}}, ParamGroup{{q}, 0.5}}, {});
  set_grad(p, {1, 1});
  opt.step();  // only p gets state
  NamedTensors sd = opt.state_dict();
  std::vector<std::string> names;
  for (auto& [k, t] : sd) names.push_back(k);
  CHECK(names == std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step",
                                          "param_groups.0.lr", "param_groups.0.weight_decay",
                                          "param_groups.0.params", "param_groups.1.lr",
                                          "param_groups.1.weight_decay", "param_groups.1.params"});
  CHECK(sd[2].second.dtype() == kInt64);
  CHECK(sd[2].second.dim() == 0);
  CHECK(sd[3].second.dtype() == kFloat64);
  CHECK(sd[8].second.to_vector<int64_t>() == std::vector<int64_t>{1});

  auto with = [&](const std::string& key, Tensor value) {
    NamedTensors d;
    bool replaced = false;
    for (auto& [k, t] : sd) {
      if (k == key) {
        replaced = true;
        if (value.defined()) d.emplace_back(k, value);
      } else {
        d.emplace_back(k, t);
      }
    }
    if (!replaced) d.emplace_back(key, value);
    return d;
  };
  Tensor before = opt.state(0).at("exp_avg").clone();
  CHECK_THROWS_WITH(opt.load_state_dict(with("state.0.exp_avg", zeros({3}, kFloat64))),
                    Contains("Adam.load_state_dict") && Contains("state.0.exp_avg") &&
                        Contains("(3,)") && Contains("(2,)"));
  CHECK_THROWS_WITH(opt.load_state_dict(with("state.0.momentum_buffer", zeros({2}, kFloat64))),
                    Contains("unexpected state key 'state.0.momentum_buffer'"));
  CHECK_THROWS_WITH(opt.load_state_dict(with("state.0.exp_avg_sq", Tensor())),
                    Contains("state of parameter 0 has 2 of the keys"));
  CHECK_THROWS_WITH(opt.load_state_dict(with("state.7.step", zeros({}, kInt64))),
                    Contains("parameter 7 is out of range for 2 parameters"));
  CHECK_THROWS_WITH(opt.load_state_dict(with("param_groups.1.params", vec({0}).to(kInt64))),
                    Contains("param_groups.1.params does not match"));
  CHECK_THROWS_WITH(opt.load_state_dict(with("param_groups.0.lr", Tensor())),
                    Contains("param_groups.0.lr is missing"));
  CHECK_THROWS_WITH(opt.load_state_dict(with("bogus", zeros({1}))),
                    Contains("unexpected key 'bogus'"));
  CHECK_CLOSE(opt.state(0).at("exp_avg"), before, 0, 0);  // failed loads changed nothing

  // An SGD state does not load into Adam.
  SGD sgd({p, q}, {.lr = 0.1, .momentum = 0.9});
  set_grad(q, {1});
  sgd.step();
  CHECK_THROWS_WITH(opt.load_state_dict(sgd.state_dict()), Contains("momentum_buffer"));

  // A valid load restores lr and state; float32 state converts to the parameter's dtype.
  NamedTensors ok = with("param_groups.1.lr", scalar_tensor(0.25, kFloat64));
  for (auto& [k, t] : ok)
    if (k == "state.0.exp_avg") t = t.to(kFloat32);
  opt.load_state_dict(ok);
  CHECK(opt.param_groups()[1].lr == 0.25);
  CHECK(opt.state(0).at("exp_avg").dtype() == kFloat64);
  CHECK(opt.state(1).empty());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
