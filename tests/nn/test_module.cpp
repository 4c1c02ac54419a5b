// nn::Module: names and order, registration rules, modes, zero_grad, state_dict round trips and
// load_state_dict's strict errors, to(dtype), summary and apply; the containers.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

// A module with a parameter, a buffer, a non-persistent buffer and nested children.
class Block : public nn::Module {
 public:
  Block() : nn::Module("Block") {
    scale = register_parameter("scale", ones({3}, kFloat64));
    running = register_buffer("running", zeros({3}, kFloat64));
    register_buffer("cache", zeros({2}, kFloat64), /*persistent=*/false);
    layers = register_module("layers", std::make_shared<nn::Sequential>(
                                           std::make_shared<nn::Linear>(3, 4, true, kFloat64),
                                           std::make_shared<nn::Tanh>(),
                                           std::make_shared<nn::Linear>(4, 3, false, kFloat64)));
  }
  Tensor forward(const Tensor& x) const { return mul(layers->forward(x), scale); }
  Tensor scale, running;
  std::shared_ptr<nn::Sequential> layers;
};

std::vector<std::string> keys(const nn::StateDict& d) {
  std::vector<std::string> out;
  for (auto& [k, t] : d) out.push_back(k);
  return out;
}

}  // namespace

TEST_CASE("Module: dotted names in registration order", "[nn]") {
  Block b;
  CHECK(keys(b.named_parameters()) ==
        std::vector<std::string>{"scale", "layers.0.weight", "layers.0.bias", "layers.2.weight"});
  CHECK(keys(b.named_buffers()) == std::vector<std::string>{"running", "cache"});
  // state_dict: own parameters, own persistent buffers, then children; no non-persistent buffer.
  CHECK(keys(b.state_dict()) == std::vector<std::string>{"scale", "running", "layers.0.weight",
                                                         "layers.0.bias", "layers.2.weight"});
  CHECK(keys(b.named_parameters(/*recurse=*/false)) == std::vector<std::string>{"scale"});
  REQUIRE(b.children().size() == 1);
  CHECK(b.named_children()[0].first == "layers");
  std::vector<std::string> mods;
  for (auto& [name, m] : b.named_modules()) mods.push_back(name + ":" + m->name());
  CHECK(mods == std::vector<std::string>{"layers:Sequential", "layers.0:Linear", "layers.1:Tanh",
                                         "layers.2:Linear"});
  CHECK(b.num_parameters() == 3 + 12 + 4 + 12);
  // parameters() returns the module's own handles.
  CHECK(b.parameters()[0].same(b.scale));
  CHECK(b.parameters()[0].requires_grad());
}

TEST_CASE("Module: registration rules", "[nn]") {
  Block b;
  CHECK_THROWS_WITH(b.register_parameter("scale", zeros({1})),
                    Contains("Block") && Contains("'scale' is already registered"));
  CHECK_THROWS_WITH(b.register_buffer("layers", zeros({1})), Contains("already registered"));
  CHECK_THROWS_WITH(b.register_parameter("a.b", zeros({1})), Contains("invalid name 'a.b'"));
  CHECK_THROWS_WITH(b.register_parameter("", zeros({1})), Contains("invalid name"));
  CHECK_THROWS_AS(b.register_parameter("i", zeros({1}, kInt64)), DTypeError);
  Tensor x = test::leaf({2});
  CHECK_THROWS_WITH(b.register_parameter("y", mul(x, 2.0)), Contains("autograd history"));
  CHECK_THROWS_AS(b.register_module("m", std::shared_ptr<nn::ReLU>()), ValueError);
}

TEST_CASE("Module: train/eval are recursive, zero_grad drops grads", "[nn]") {
  Block b;
  CHECK(b.is_training());
  b.eval();
  CHECK(!b.is_training());
  for (auto& m : b.layers->children()) CHECK(!m->is_training());
  b.train();
  for (auto& m : b.layers->children()) CHECK(m->is_training());

  sum(b.forward(test::leaf({2, 3}))).backward();
  for (auto& p : b.parameters()) CHECK(p.grad().defined());
  b.zero_grad();
  for (auto& p : b.parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("Module: state_dict round trip keeps parameter identity", "[nn]") {
  Block a, b;
  // Make the two models differ, including the buffer.
  {
    NoGradGuard g;
    a.running.fill_(7.0);
  }
  Tensor w_before = b.layers->at<nn::Linear>(0)->weight();
  const void* data_before = w_before.storage()->data();
  b.load_state_dict(a.state_dict());
  CHECK(b.layers->at<nn::Linear>(0)->weight().same(w_before));
  CHECK(w_before.storage()->data() == data_before);
  CHECK(w_before.requires_grad());
  for (auto& [k, t] : a.state_dict()) {
    INFO(k);
    const Tensor* other = nullptr;
    auto sd = b.state_dict();
    for (auto& [k2, t2] : sd)
      if (k2 == k) other = &t2;
    REQUIRE(other);
    CHECK(test::close_excess(*other, t, 0, 0) <= 0);
  }
  // The state_dict shares storage with the module: it is a view, not a snapshot.
  auto sd = a.state_dict();
  CHECK(sd[0].second.storage() == a.scale.storage());
  CHECK(!sd[0].second.requires_grad());
}

TEST_CASE("Module: load_state_dict strict errors name every problem and change nothing", "[nn]") {
  Block b;
  nn::StateDict sd = b.state_dict();
  nn::StateDict bad;
  for (auto& [k, t] : sd) {
    if (k == "layers.0.bias") continue;  // missing
    if (k == "layers.2.weight")
      bad.emplace_back(k, zeros({4, 3}, kFloat64));  // transposed
    else
      bad.emplace_back(k, full_like(t, 5.0));
  }
  bad.emplace_back("layers.9.weight", zeros({1}));  // unexpected
  Tensor before = b.scale.clone();
  CHECK_THROWS_AS(b.load_state_dict(bad), ValueError);
  CHECK_THROWS_WITH(b.load_state_dict(bad),
                    Contains("Block.load_state_dict") && Contains("missing keys: layers.0.bias") &&
                        Contains("unexpected keys: layers.9.weight") &&
                        Contains("layers.2.weight: checkpoint (4, 3) vs model (3, 4)"));
  CHECK(test::close_excess(b.scale, before, 0, 0) <= 0);  // nothing was copied

  // Non-strict: missing and unexpected keys are ignored, a shape mismatch still is an error.
  CHECK_THROWS_WITH(b.load_state_dict(bad, /*strict=*/false),
                    Contains("shape mismatch") && !Contains("missing keys"));
  bad.erase(
      std::remove_if(bad.begin(), bad.end(), [](auto& e) { return e.first == "layers.2.weight"; }),
      bad.end());
  b.load_state_dict(bad, /*strict=*/false);
  CHECK(b.scale.to_vector<double>() == std::vector<double>{5, 5, 5});
  CHECK(b.running.to_vector<double>() == std::vector<double>{5, 5, 5});

  nn::StateDict dup = {{"scale", ones({3}, kFloat64)}, {"scale", ones({3}, kFloat64)}};
  CHECK_THROWS_WITH(b.load_state_dict(dup, false), Contains("duplicate keys: scale"));
}

TEST_CASE("Module: load_state_dict converts dtype, to(dtype) keeps handles", "[nn]") {
  nn::Linear f32(3, 2);
  nn::Linear f64(3, 2, true, kFloat64);
  f32.load_state_dict(f64.state_dict());
  CHECK(f32.weight().dtype() == kFloat32);
  CHECK_CLOSE(f32.weight(), f64.weight(), 1e-7, 1e-6);

  Tensor w = f32.weight();
  sum(f32(ones({1, 3}))).backward();
  REQUIRE(w.grad().defined());
  f32.to(kFloat64);
  CHECK(w.dtype() == kFloat64);
  CHECK(f32.weight().same(w));
  CHECK(!w.grad().defined());
  CHECK(w.requires_grad());
  Tensor y = f32(ones({1, 3}, kFloat64));
  CHECK(y.dtype() == kFloat64);
  CHECK_CLOSE(f32.weight(), f64.weight(), 1e-7, 1e-6);
  CHECK_THROWS_AS(f32.to(kInt64), DTypeError);
}

TEST_CASE("Module: summary and apply", "[nn]") {
  Block b;
  std::string s = b.summary();
  INFO(s);
  CHECK(s.rfind("Block\n", 0) == 0);
  CHECK_THAT(s, Contains("layers.0.weight") && Contains("(4, 3)") && Contains("total"));
  CHECK_THAT(s, Contains(std::to_string(b.num_parameters())));
  std::vector<std::string> visited;
  b.apply([&](nn::Module& m) { visited.push_back(m.name()); });
  CHECK(visited == std::vector<std::string>{"Linear", "Tanh", "Linear", "Sequential", "Block"});
  // apply as an initialiser: zero every Linear bias.
  b.apply([](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m); lin && lin->bias().defined())
      nn::init::zeros_(lin->bias());
  });
  CHECK(b.layers->at<nn::Linear>(0)->bias().to_vector<double>() == std::vector<double>(4, 0.0));
}

TEST_CASE("Sequential and ModuleList", "[nn]") {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 5, true, kFloat64),
                                              std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::Sigmoid>());
  Tensor x = test::leaf({2, 4});
  auto lin = seq->at<nn::Linear>(0);
  Tensor expected = sigmoid(relu(add(matmul(x, lin->weight().t()), lin->bias())));
  CHECK_CLOSE((*seq)(x), expected, 1e-12, 0);
  CHECK(seq->size() == 3);
  CHECK_THROWS_WITH(seq->at<nn::Linear>(1), Contains("Sequential") && Contains("ReLU"));
  CHECK_THROWS_WITH((*seq)[3], Contains("index 3 is out of range for size 3"));
  nn::Sequential empty_seq;
  CHECK(empty_seq(x).same(x));

  nn::ModuleList list;
  for (int i = 0; i < 3; ++i) list.push_back(std::make_shared<nn::Linear>(2, 2, false));
  CHECK(keys(list.named_parameters()) ==
        std::vector<std::string>{"0.weight", "1.weight", "2.weight"});
  int n = 0;
  for (auto& m : list) n += m->name() == "Linear";
  CHECK(n == 3);
  CHECK(list.at<nn::Linear>(2)->in_features() == 2);
  CHECK_THROWS_AS(list[5], IndexError);
}

TEST_CASE("Module: a shared submodule's parameters are listed once", "[nn]") {
  auto shared = std::make_shared<nn::Linear>(3, 3, true, kFloat64);
  nn::Sequential seq(shared, std::make_shared<nn::Tanh>(), shared);
  CHECK(keys(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  CHECK(keys(seq.state_dict()) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  CHECK(seq.named_modules().size() == 2);  // "0" and "1"; "2" is the same module as "0"
  CHECK(seq.num_parameters() == 12);
  optim::SGD opt(seq.parameters(), {.lr = 0.1});  // no "appears more than once" error
  Tensor x = test::leaf({2, 3});
  CHECK_CLOSE(seq(x), (*shared)(tanh((*shared)(x))), 0, 0);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
