// nn/prune.h: magnitude masks (per layer, global, iterative), masks through optimizer steps and a
// safetensors round trip, remove(), and attention-head pruning against gating those heads to 0.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "nabla/core/io/safetensors.h"
#include "nabla/optim/adam.h"
#include "nabla/optim/sgd.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

// The error's type, and a message naming what it must name.
#define CHECK_THROWS_NAMING(expr, type, text) \
  do {                                        \
    CHECK_THROWS_AS(expr, type);              \
    CHECK_THROWS_WITH(expr, Contains(text));  \
  } while (0)

namespace {

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed, double second_scale = 1.0) {
  Generator g(seed);
  auto a = std::make_shared<nn::Linear>(6, 8);
  auto b = std::make_shared<nn::Linear>(8, 4);
  a->reset_parameters(g);
  b->reset_parameters(g);
  {
    NoGradGuard no_grad;
    Tensor w = b->weight().detach();
    w.copy_(mul(w, second_scale));
  }
  return std::make_shared<nn::Sequential>(a, std::make_shared<nn::ReLU>(), b);
}

std::vector<double> values(const Tensor& t) {
  return t.detach().to(kFloat64).contiguous().to_vector<double>();
}

Tensor buffer(const nn::Module& m, const std::string& name) {
  for (auto& [k, b] : m.named_buffers())
    if (k == name) return b;
  return Tensor();
}

void train_steps(nn::Sequential& model, optim::Optimizer& opt, int steps) {
  Generator g(5);
  for (int i = 0; i < steps; ++i) {
    Tensor x = randn({16, 6}, g);
    Tensor y = randint(0, 4, {16}, g);
    opt.zero_grad();
    cross_entropy(model(x), y).backward();
    opt.step();
  }
}

// Every entry the mask zeroes is exactly 0 in the parameter.
void check_masked_zero(const nn::Module& m, const std::string& param) {
  Tensor w, mask = buffer(m, param + "_mask");
  for (auto& [k, p] : m.named_parameters())
    if (k == param) w = p;
  REQUIRE(mask.defined());
  std::vector<double> wv = values(w), mv = values(mask);
  for (size_t i = 0; i < wv.size(); ++i)
    if (mv[i] == 0.0) CHECK(wv[i] == 0.0);
}

}  // namespace

TEST_CASE("l1_unstructured prunes the smallest magnitudes, iteratively", "[prune]") {
  auto model = make_mlp(1);
  std::vector<double> before = values(model->named_parameters()[0].second);
  nn::prune::l1_unstructured(*model, "0.weight", 0.25);  // 12 of 48
  Tensor w = model->named_parameters()[0].second;
  CHECK(nn::prune::sparsity(w) == Approx(12.0 / 48));
  CHECK(nn::prune::is_pruned(*model, "0.weight"));
  CHECK_FALSE(nn::prune::is_pruned(*model, "2.weight"));
  // The 12 zeroed entries are the 12 smallest |w|.
  std::vector<double> mags = before;
  for (double& v : mags) v = std::abs(v);
  std::vector<double> sorted = mags;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> after = values(w);
  for (size_t i = 0; i < after.size(); ++i) CHECK((after[i] == 0.0) == (mags[i] <= sorted[11]));
  // Again: half of the 36 survivors.
  nn::prune::l1_unstructured(*model, "0.weight", 0.5);
  CHECK(nn::prune::sparsity(w) == Approx(30.0 / 48));
  CHECK(nn::prune::sparsity(buffer(*model, "0.weight_mask")) == Approx(30.0 / 48));
}

TEST_CASE("global_unstructured vs per layer sparsity", "[prune]") {
  // The second layer's weights are 10x larger: globally it loses almost nothing.
  auto global = make_mlp(2, 10.0), local = make_mlp(2, 10.0);
  const std::vector<std::string> names = nn::prune::linear_weights(*global);
  REQUIRE(names == std::vector<std::string>{"0.weight", "2.weight"});
  nn::prune::global_unstructured(*global, names, 0.5);
  for (const auto& n : names) nn::prune::l1_unstructured(*local, n, 0.5);
  auto param = [](nn::Module& m, const std::string& n) {
    for (auto& [k, p] : m.named_parameters())
      if (k == n) return p;
    return Tensor();
  };
  const double g0 = nn::prune::sparsity(param(*global, "0.weight"));
  const double g2 = nn::prune::sparsity(param(*global, "2.weight"));
  CHECK(g0 > 0.6);
  CHECK(g2 < 0.2);
  CHECK((g0 * 48 + g2 * 32) == Approx(40.0));  // half of all 80 entries
  CHECK(nn::prune::sparsity(param(*local, "0.weight")) == Approx(0.5));
  CHECK(nn::prune::sparsity(param(*local, "2.weight")) == Approx(0.5));
}

TEST_CASE("pruned weights stay exactly zero through SGD, Adam and AdamW steps", "[prune]") {
  for (int which = 0; which < 3; ++which) {
    INFO("optimizer " << which);
    auto model = make_mlp(3);
    nn::prune::global_unstructured(*model, nn::prune::linear_weights(*model), 0.6);
    std::vector<double> before = values(model->named_parameters()[0].second);
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0)
      opt = std::make_unique<optim::SGD>(
          model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
    else if (which == 1)
      opt = std::make_unique<optim::Adam>(model->parameters(),
                                          optim::AdamOptions{.lr = 0.01, .weight_decay = 0.01});
    else
      opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 0.01});
    train_steps(*model, *opt, 5);
    check_masked_zero(*model, "0.weight");
    check_masked_zero(*model, "2.weight");
    // The surviving weights did train.
    std::vector<double> after = values(model->named_parameters()[0].second);
    int changed = 0;
    for (size_t i = 0; i < after.size(); ++i) changed += after[i] != before[i];
    CHECK(changed > 10);
    // A pruned entry's gradient is 0.
    Tensor mask = buffer(*model, "0.weight_mask");
    std::vector<double> grad = values(model->named_parameters()[0].second.grad()),
                        mv = values(mask);
    for (size_t i = 0; i < grad.size(); ++i)
      if (mv[i] == 0.0) CHECK(grad[i] == 0.0);
  }
}

TEST_CASE("reapply undoes momentum that predates the mask", "[prune]") {
  auto model = make_mlp(4);
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_steps(*model, opt, 3);
  nn::prune::l1_unstructured(*model, "0.weight", 0.5);
  train_steps(*model, opt, 1);
  Tensor w = model->named_parameters()[0].second;
  CHECK(nn::prune::sparsity(w) < 0.5);  // the old momentum moved pruned entries
  nn::prune::reapply(*model);
  check_masked_zero(*model, "0.weight");
  CHECK(nn::prune::sparsity(w) >= 0.5);
}

TEST_CASE("masks survive a safetensors round trip and keep masking gradients", "[prune]") {
  auto model = make_mlp(5);
  nn::prune::global_unstructured(*model, nn::prune::linear_weights(*model), 0.7);
  const std::string path = "prune_roundtrip_" + std::to_string(::getpid()) + ".safetensors";
  io::save_safetensors(path, model->state_dict());
  auto fresh = make_mlp(6);
  io::SafetensorsFile file = io::load_safetensors(path);
  std::remove(path.c_str());
  const nn::StateDict& dict = file.tensors;
  CHECK(nn::prune::restore_masks(*fresh, dict) == 2);
  fresh->load_state_dict(dict);
  CHECK(values(buffer(*fresh, "2.weight_mask")) == values(buffer(*model, "2.weight_mask")));
  CHECK(values(fresh->named_parameters()[0].second) == values(model->named_parameters()[0].second));
  optim::Adam opt(fresh->parameters(), {.lr = 0.01});
  train_steps(*fresh, opt, 3);
  check_masked_zero(*fresh, "0.weight");
  check_masked_zero(*fresh, "2.weight");
}

TEST_CASE("remove makes pruning permanent", "[prune]") {
  auto model = make_mlp(7);
  nn::prune::l1_unstructured(*model, "0.weight", 0.5);
  nn::prune::remove(*model, "0.weight");
  CHECK_FALSE(nn::prune::is_pruned(*model, "0.weight"));
  for (auto& [k, t] : model->state_dict()) CHECK(k.find("_mask") == std::string::npos);
  Tensor w = model->named_parameters()[0].second;
  CHECK(nn::prune::sparsity(w) == Approx(0.5));
  // Gradients are no longer masked: the zeros train again.
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  train_steps(*model, opt, 1);
  CHECK(nn::prune::sparsity(w) < 0.5);
  CHECK_THROWS_NAMING(nn::prune::remove(*model, "0.weight"), ValueError, "not pruned");
}

TEST_CASE("prune errors name the function and the parameter", "[prune][errors]") {
  auto model = make_mlp(8);
  CHECK_THROWS_NAMING(nn::prune::l1_unstructured(*model, "0.weight", 1.5), ValueError,
                      "l1_unstructured");
  CHECK_THROWS_NAMING(nn::prune::l1_unstructured(*model, "9.weight", 0.1), ValueError, "9.weight");
  CHECK_THROWS_NAMING(nn::prune::custom_from_mask(*model, "0.weight", ones({2, 2})), ShapeError,
                      "custom_from_mask");
}

namespace {

std::shared_ptr<nn::MultiheadAttention> make_mha(int64_t kdim = 0) {
  Generator g(11);
  auto m = std::make_shared<nn::MultiheadAttention>(8, 4, 0.0, true, kdim, kdim, true);
  m->reset_parameters(g);
  m->to(kFloat64);
  NoGradGuard no_grad;
  for (auto& [name, p] : m->named_parameters())
    if (name.find("bias") != std::string::npos) p.detach().copy_(randn(p.shape(), g, kFloat64));
  return m;
}

}  // namespace

TEST_CASE("prune_heads equals gating those heads to zero", "[prune][heads]") {
  for (int64_t kdim : {0, 6}) {
    INFO("kdim " << kdim);
    auto mha = make_mha(kdim);
    Generator g(12);
    Tensor q = randn({2, 5, 8}, g, kFloat64);
    Tensor kv = kdim ? randn({2, 7, kdim}, g, kFloat64) : q;
    Tensor gated;
    {
      nn::prune::HeadGates gates(*mha, false);
      REQUIRE(gates.layers() == 1);
      gates.set_gate(0, {1.0, 0.0, 1.0, 0.0});
      gated = (*mha)(q, kv, kv).output;
    }
    mha->prune_heads({1, 3});
    CHECK(mha->num_heads() == 2);
    CHECK(mha->head_dim() == 2);
    if (kdim == 0) {
      CHECK(mha->in_proj_weight().shape() == Shape{12, 8});
    } else {
      CHECK(mha->q_proj_weight().shape() == Shape{4, 8});
      CHECK(mha->k_proj_weight().shape() == Shape{4, 6});
    }
    CHECK(mha->in_proj_bias().shape() == Shape{12});
    CHECK(mha->out_proj()->weight().shape() == Shape{8, 4});
    CHECK(mha->num_parameters() == (kdim ? 4 * 8 + 2 * 4 * 6 : 12 * 8) + 12 + 8 * 4 + 8);
    CHECK_CLOSE((*mha)(q, kv, kv).output, gated, 1e-12, 0.0);
    CHECK_CLOSE((*mha)(q, kv, kv, {.need_weights = false, .path = nn::AttentionPath::Fused}).output,
                gated, 1e-12, 0.0);
    // Still trains: gradients reach the smaller parameters.
    sum((*mha)(q, kv, kv).output).backward();
    CHECK(mha->out_proj()->weight().grad().shape() == Shape{8, 4});
  }
  auto mha = make_mha();
  CHECK_THROWS_NAMING(mha->prune_heads({0, 1, 2, 3}), ValueError, "at least one");
  CHECK_THROWS_NAMING(mha->prune_heads({4}), IndexError, "prune_heads");
}

TEST_CASE("head importance finds a dead head and prune_heads_by_importance removes it",
          "[prune][heads]") {
  auto mha = make_mha();
  {  // Head 2's values are zero: its output, and so its gate's gradient, is 0.
    NoGradGuard no_grad;
    Tensor w = mha->in_proj_weight().detach(), b = mha->in_proj_bias().detach();
    w.narrow(0, 16 + 2 * 2, 2).fill_(0.0);
    b.narrow(0, 16 + 2 * 2, 2).fill_(0.0);
  }
  Generator g(13);
  std::vector<std::vector<double>> importance;
  {
    nn::prune::HeadGates gates(*mha);
    for (int i = 0; i < 3; ++i) {
      Tensor x = randn({2, 5, 8}, g, kFloat64);
      sum(mul((*mha)(x, x, x).output, randn({2, 5, 8}, g, kFloat64))).backward();
    }
    importance = gates.importance();
  }
  REQUIRE(importance.size() == 1);
  double norm = 0;
  for (double v : importance[0]) norm += v * v;
  CHECK(norm == Approx(1.0));
  CHECK(importance[0][2] == 0.0);
  auto removed = nn::prune::prune_heads_by_importance(*mha, importance, 1);
  CHECK(removed == std::vector<std::vector<int64_t>>{{2}});
  CHECK(mha->num_heads() == 3);
  // Asking for more than all-but-one leaves one head.
  nn::prune::prune_heads_by_importance(*mha, {{0.1, 0.2, 0.3}}, 10);
  CHECK(mha->num_heads() == 1);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef CHECK_THROWS_NAMING
