// nn::Conv1d/2d and the pooling modules: PyTorch's names, shapes and default initialisation;
// PyTorch state dicts of a small CNN and a 1-D net (fixtures from
// tests/fixtures/gen_conv_pool.py) give PyTorch's outputs and gradients; gradcheck through the
// modules; errors name the module.
#include "tests/nn/module_gradcheck.h"
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

const io::SafetensorsFile& fx() { return test::fixture("conv_pool"); }

nn::StateDict entries(const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [name, t] : fx().tensors)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

// Loads NAME.state into `model`, runs it on NAME.x, backpropagates NAME.gout and compares the
// output and the gradients of x and of every parameter with PyTorch's.
void check_loaded(const std::string& name, nn::Module& model,
                  const std::function<Tensor(const Tensor&)>& fwd, DType dt) {
  const std::string sfx = dt == kFloat64 ? "" : "_f32";
  const double atol = dt == kFloat64 ? 1e-10 : 1e-5, rtol = dt == kFloat64 ? 1e-10 : 1e-4;
  INFO("model " << name << ", " << dtype_name(dt));
  const nn::StateDict state = entries(name + ".state.");
  REQUIRE(state.size() == model.state_dict().size());
  model.load_state_dict(state);
  Tensor x = fx().at(name + ".x").to(dt).detach().requires_grad_();
  Tensor out = fwd(x);
  CHECK_CLOSE(out, fx().at(name + ".out" + sfx), atol, rtol);
  const nn::StateDict params = model.named_parameters();
  std::vector<Tensor> wrt{x};
  for (const auto& [key, p] : params) wrt.push_back(p);
  auto grads = autograd::grad({out}, wrt, {fx().at(name + ".gout").to(dt)});
  CHECK_CLOSE(grads[0], fx().at(name + ".grad.x" + sfx), atol, rtol);
  for (size_t i = 0; i < params.size(); ++i) {
    INFO("gradient of " << params[i].first);
    CHECK_CLOSE(grads[i + 1], fx().at(name + ".grad." + params[i].first + sfx), atol, rtol);
  }
}

// Every element within the kaiming_uniform_(a = sqrt(5)) bound 1/sqrt(fan_in), and the draws
// spread over it (the largest above 0.9 of the bound).
void check_uniform_bound(const Tensor& t, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  double largest = 0;
  for (double v : t.to(kFloat64).to_vector<double>()) largest = std::max(largest, std::abs(v));
  CHECK(largest <= bound);
  CHECK(largest > 0.9 * bound);
}

}  // namespace

TEST_CASE("Conv1d/Conv2d: PyTorch names, shapes and default initialisation", "[nn]") {
  nn::Conv2d conv(16, 32, 3, {.padding = 1});
  const nn::StateDict params = conv.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[1].first == "bias");
  CHECK(conv.weight().shape() == Shape{32, 16, 3, 3});
  check_uniform_bound(conv.weight(), 16 * 9);
  check_uniform_bound(conv.bias(), 16 * 9);
  CHECK(conv(zeros({2, 16, 8, 8})).shape() == Shape{2, 32, 8, 8});

  nn::Conv2d depthwise(8, 8, {3, 5}, {.padding = "same", .groups = 8, .bias = false});
  CHECK(depthwise.weight().shape() == Shape{8, 1, 3, 5});
  CHECK_FALSE(depthwise.bias().defined());
  CHECK(depthwise.named_parameters().size() == 1);
  check_uniform_bound(depthwise.weight(), 15);
  CHECK(depthwise(zeros({8, 6, 7})).shape() == Shape{8, 6, 7});

  nn::Conv1d conv1(4, 6, 5, {.stride = 2, .groups = 2, .dtype = kFloat64});
  CHECK(conv1.weight().shape() == Shape{6, 2, 5});
  CHECK(conv1.weight().dtype() == kFloat64);
  check_uniform_bound(conv1.weight(), 10);
  CHECK(conv1(zeros({3, 4, 11}, kFloat64)).shape() == Shape{3, 6, 4});

  nn::MaxPool2d pool(3, {.stride = 2, .padding = 1});
  CHECK(pool.named_parameters().empty());
  Tensor img = randn({1, 2, 7, 7});
  CHECK(pool(img).shape() == Shape{1, 2, 4, 4});
  const MaxPoolResult r = pool.forward_with_indices(img);
  CHECK_CLOSE(r.output, pool(img), 0, 0);
  CHECK(r.indices.dtype() == kInt64);
  CHECK(nn::AvgPool2d(2)(img).shape() == Shape{1, 2, 3, 3});
  CHECK(nn::AvgPool2d(2, {.ceil_mode = true})(img).shape() == Shape{1, 2, 4, 4});
  CHECK(nn::AdaptiveAvgPool2d({1, 3})(img).shape() == Shape{1, 2, 1, 3});
  CHECK(nn::MaxPool1d(2)(zeros({3, 9})).shape() == Shape{3, 4});
  CHECK(nn::AvgPool1d(3, {.stride = 1, .padding = 1})(zeros({3, 9})).shape() == Shape{3, 9});
  CHECK(nn::AdaptiveAvgPool1d(4)(zeros({1, 3, 9})).shape() == Shape{1, 3, 4});
}

TEST_CASE("parity: PyTorch conv/pool models load and give PyTorch's outputs", "[nn][parity]") {
  for (DType dt : {kFloat64, kFloat32}) {
    nn::Sequential cnn(
        std::make_shared<nn::Conv2d>(3, 6, 3, nn::Conv2dOptions{.padding = 1, .dtype = dt}),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Conv2d>(
            6, 8, 3, nn::Conv2dOptions{.padding = "same", .dilation = 2, .groups = 2, .dtype = dt}),
        std::make_shared<nn::AvgPool2d>(2, nn::AvgPool2dOptions{.ceil_mode = true}),
        std::make_shared<nn::AdaptiveAvgPool2d>(2), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(32, 5, true, dt));
    check_loaded(
        "cnn", cnn, [&](const Tensor& x) { return cnn(x); }, dt);

    nn::Sequential net1d(
        std::make_shared<nn::Conv1d>(
            4, 6, 3, nn::Conv1dOptions{.stride = 2, .padding = 1, .bias = false, .dtype = dt}),
        std::make_shared<nn::MaxPool1d>(2),
        std::make_shared<nn::AvgPool1d>(
            3, nn::AvgPool1dOptions{.stride = 1, .padding = 1, .count_include_pad = false}));
    check_loaded(
        "net1d", net1d, [&](const Tensor& x) { return net1d(x); }, dt);
  }
}

TEST_CASE("Conv1d/Conv2d modules pass gradcheck", "[nn]") {
  nn::Conv2d conv(
      4, 6, {2, 3},
      {.stride = {1, 2}, .padding = 1, .dilation = {2, 1}, .groups = 2, .dtype = kFloat64});
  const std::vector<Tensor> x{test::leaf({2, 4, 5, 6}, 1)};
  CHECK_MODULE_GRADCHECK(conv, x, [&](auto& in) { return conv(in[0]); });
  nn::Conv1d conv1(3, 2, 3, {.padding = "same", .dilation = 2, .dtype = kFloat64});
  const std::vector<Tensor> x1{test::leaf({2, 3, 7}, 2)};
  CHECK_MODULE_GRADCHECK(conv1, x1, [&](auto& in) { return avg_pool1d(conv1(in[0]), 2); });
}

TEST_CASE("conv and pool modules name themselves in errors", "[nn]") {
  CHECK_THROWS_WITH(nn::Conv2d(3, 4, 3, {.groups = 2}), Contains("Conv2d") && Contains("groups=2"));
  CHECK_THROWS_AS(nn::Conv2d(4, 4, 3, {.groups = 0}), ValueError);
  CHECK_THROWS_WITH(nn::Conv2d(3, 4, 3, {.stride = 2, .padding = "same"}),
                    Contains("Conv2d") && Contains("same"));
  CHECK_THROWS_WITH(nn::Conv1d(3, 4, 3, {.padding = "full"}),
                    Contains("Conv1d") && Contains("\"full\""));
  CHECK_THROWS_AS(nn::Conv2d(3, 4, {3, 0}), ValueError);
  CHECK_THROWS_AS(nn::Conv1d(3, 4, 3, {.dtype = kInt64}), DTypeError);
  nn::Conv2d conv(3, 4, 3);
  CHECK_THROWS_WITH(conv(zeros({1, 2, 5, 5})),
                    Contains("Conv2d") && Contains("in_channels = 3") && Contains("(1, 2, 5, 5)"));
  CHECK_THROWS_AS(conv(zeros({1, 3, 5, 5}, kFloat64)), DTypeError);
  CHECK_THROWS_WITH(nn::MaxPool2d(3, {.padding = 2})(zeros({1, 1, 5, 5})),
                    Contains("max_pool2d") && Contains("padding 2"));
  CHECK_THROWS_WITH(nn::AdaptiveAvgPool2d({2, -2})(zeros({1, 1, 5, 5})),
                    Contains("adaptive_avg_pool2d"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
