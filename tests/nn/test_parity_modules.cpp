// nn modules against PyTorch (fixtures from tests/fixtures/gen_modules.py):
//  - a state dict exported from PyTorch loads into Linear, LayerNorm, Embedding(padding_idx) and a
//    Sequential and gives PyTorch's outputs and gradients;
//  - a 3-layer MLP with LayerNorm and Dropout(p=0) trained 20 steps (cross-entropy, warm-up +
//    cosine, clip_grad_norm_) with SGD (momentum, Nesterov), Adam and AdamW: every loss, every
//    clipping norm and the final parameters agree (float64 1e-10; float32 1e-5 + 1e-4 relative);
//  - a module's state dict round-trips bit for bit through safetensors and io::Checkpoint.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "nabla/core/io/checkpoint.h"
#include "tests/helpers.h"
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;

namespace {

const io::SafetensorsFile& fx() { return test::fixture("modules"); }

// The entries "<prefix><key>" of the fixture as a state dict keyed by <key>.
nn::StateDict entries(const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [name, t] : fx().tensors)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

using test::bit_equal;

using Forward = std::function<Tensor(const Tensor&)>;

// Loads NAME.state into `module` (built in dtype dt), runs fwd on NAME.x, backpropagates NAME.gout
// and compares the output and the gradients of every parameter (and of x when it is floating).
void check_loaded(const std::string& name, nn::Module& module, const Forward& fwd, DType dt) {
  const std::string sfx = dt == kFloat64 ? "" : "_f32";
  const double atol = dt == kFloat64 ? 1e-10 : 1e-5, rtol = dt == kFloat64 ? 1e-10 : 1e-4;
  INFO("module " << name << ", " << dtype_name(dt));
  const nn::StateDict state = entries(name + ".state.");
  REQUIRE(!state.empty());
  module.load_state_dict(state);
  // PyTorch's float32 values arrive exactly (converted exactly to float64).
  for (const auto& [key, t] : module.state_dict()) {
    INFO("state " << key);
    CHECK(bit_equal(t, fx().at(name + ".state." + key).to(dt)));
  }

  Tensor x = fx().at(name + ".x");
  const bool x_grad = is_floating(x.dtype());
  if (x_grad) x = x.to(dt).detach().requires_grad_();
  Tensor out = fwd(x);
  CHECK_CLOSE(out, fx().at(name + ".out" + sfx), atol, rtol);

  const nn::StateDict params = module.named_parameters();
  std::vector<Tensor> wrt;
  for (const auto& [key, p] : params) wrt.push_back(p);
  if (x_grad) wrt.push_back(x);
  auto grads = autograd::grad({out}, wrt, {fx().at(name + ".gout").to(dt)});
  for (size_t i = 0; i < wrt.size(); ++i) {
    const std::string key = i < params.size() ? params[i].first : "x";
    INFO("gradient of " << key);
    CHECK_CLOSE(grads[i], fx().at(name + ".grad." + key + sfx), atol, rtol);
  }
}

std::shared_ptr<nn::Sequential> make_mlp(DType dt) {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(6, 16, true, dt),
      std::make_shared<nn::LayerNorm>(Shape{16}, 1e-5, true, dt), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Dropout>(0.0), std::make_shared<nn::Linear>(16, 16, true, dt),
      std::make_shared<nn::LayerNorm>(Shape{16}, 1e-5, true, dt), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.0), std::make_shared<nn::Linear>(16, 4, true, dt));
}

void check_training(const std::string& cfg, DType dt) {
  const std::string sfx = dt == kFloat64 ? "" : "_f32";
  const double atol = dt == kFloat64 ? 1e-10 : 1e-5, rtol = dt == kFloat64 ? 1e-10 : 1e-4;
  INFO("config " << cfg << ", " << dtype_name(dt));
  auto model = make_mlp(dt);
  model->load_state_dict(entries("train.init."));
  model->train();
  Tensor x = fx().at("train.x").to(dt), y = fx().at("train.y");

  std::unique_ptr<Optimizer> opt;
  if (cfg == "sgd_nesterov")
    opt = std::make_unique<SGD>(
        model->parameters(),
        SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true});
  else if (cfg == "sgd_momentum")
    opt = std::make_unique<SGD>(model->parameters(),
                                SGDOptions{.lr = 0.1, .momentum = 0.8, .dampening = 0.1});
  else if (cfg == "adam")
    opt =
        std::make_unique<Adam>(model->parameters(), AdamOptions{.lr = 1e-2, .weight_decay = 1e-4});
  else
    opt = std::make_unique<AdamW>(model->parameters(),
                                  AdamWOptions{.lr = 1e-2, .weight_decay = 0.05});
  auto warmup = std::make_shared<LinearLR>(*opt, 0.2, 1.0, 5);
  auto cosine = std::make_shared<CosineAnnealingLR>(*opt, 15);
  SequentialLR sched(*opt, {warmup, cosine}, {5});

  std::vector<double> losses, norms;
  for (int step = 0; step < 20; ++step) {
    opt->zero_grad();
    Tensor loss = cross_entropy((*model)(x), y);
    loss.backward();
    losses.push_back(loss.item());
    norms.push_back(clip_grad_norm_(model->parameters(), 0.5));
    opt->step();
    sched.step();
  }
  CHECK_CLOSE(from_vector<double>(losses, {20}), fx().at(cfg + ".loss" + sfx), atol, rtol);
  CHECK_CLOSE(from_vector<double>(norms, {20}), fx().at(cfg + ".norm" + sfx), atol, rtol);
  const nn::StateDict final_state = model->state_dict();
  CHECK(final_state.size() == 10);
  for (const auto& [k, t] : final_state) {
    INFO("parameter " << k);
    CHECK_CLOSE(t, fx().at(cfg + ".final" + sfx + "." + k), atol, rtol);
  }
}

}  // namespace

TEST_CASE("parity: PyTorch state dicts load and give PyTorch's outputs", "[nn][parity]") {
  for (DType dt : {kFloat64, kFloat32}) {
    nn::Linear linear(5, 3, true, dt);
    check_loaded(
        "linear", linear, [&](const Tensor& x) { return linear(x); }, dt);

    nn::LayerNorm ln(Shape{3, 4}, 1e-5, true, dt);
    check_loaded(
        "layernorm", ln, [&](const Tensor& x) { return ln(x); }, dt);

    nn::Embedding emb(10, 4, 2, dt);
    check_loaded(
        "embedding", emb, [&](const Tensor& i) { return emb(i); }, dt);
    // The padding row gets no gradient, as in PyTorch (index 2 appears four times).
    CHECK(fx().at("embedding.grad.weight" + std::string(dt == kFloat64 ? "" : "_f32"))
              .select(0, 2)
              .to(kFloat64)
              .to_vector<double>() == std::vector<double>(4, 0.0));

    nn::Sequential seq(std::make_shared<nn::Linear>(4, 8, true, dt),
                       std::make_shared<nn::LayerNorm>(Shape{8}, 1e-5, true, dt),
                       std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(8, 2, true, dt));
    check_loaded(
        "sequential", seq, [&](const Tensor& x) { return seq(x); }, dt);
  }
}

TEST_CASE("parity: MLP with LayerNorm and Dropout(p=0), SGD/Adam/AdamW + warm-up/cosine + clipping",
          "[nn][parity]") {
  for (const char* cfg : {"sgd_nesterov", "sgd_momentum", "adam", "adamw"})
    for (DType dt : {kFloat64, kFloat32}) check_training(cfg, dt);
}

TEST_CASE("Module state dict: save -> load round trip is bit-exact", "[nn][io]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nabla_module_rt_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    auto make = [dt] {
      return std::make_shared<nn::Sequential>(
          std::make_shared<nn::Linear>(5, 7, true, dt),
          std::make_shared<nn::LayerNorm>(Shape{7}, 1e-5, true, dt), std::make_shared<nn::GELU>(),
          std::make_shared<nn::Linear>(7, 3, false, dt));
    };
    manual_seed(1);
    auto a = make();
    {
      // Values that do not survive a decimal print: only a binary round trip keeps them.
      NoGradGuard no_grad;
      for (Tensor p : a->parameters()) p.copy_(div(randn(p.shape(), p.dtype()), 3.0));
    }
    manual_seed(2);
    auto b = make();
    auto c = make();
    Tensor x = randn({4, 5}, dt);
    REQUIRE_FALSE(bit_equal((*a)(x), (*b)(x)));

    // Plain safetensors file.
    io::save_safetensors(path, a->state_dict());
    b->load_state_dict(io::load_safetensors(path).tensors);
    // Through a checkpoint section.
    io::Checkpoint ck;
    ck.put_section("model", a->state_dict());
    ck.save(path);
    c->load_state_dict(io::Checkpoint::load(path).section("model"));

    const nn::StateDict sa = a->state_dict(), sb = b->state_dict(), sc = c->state_dict();
    REQUIRE(sa.size() == 5);
    REQUIRE(sb.size() == sa.size());
    REQUIRE(sc.size() == sa.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      INFO(sa[i].first);
      CHECK(sb[i].first == sa[i].first);
      CHECK(bit_equal(sb[i].second, sa[i].second));
      CHECK(bit_equal(sc[i].second, sa[i].second));
    }
    CHECK(bit_equal((*b)(x), (*a)(x)));
    CHECK(bit_equal((*c)(x), (*a)(x)));
  }
  std::filesystem::remove(path);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
