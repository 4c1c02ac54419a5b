// Autocast (core/autocast.h, ops/autocast.h): the op policy, each autocast product's forward and
// backward against float64 within the bf16 error bound, and the scope's rules.
//
// The bound. bfloat16 keeps 8 significant bits, so rounding to it has relative error at most
// u = 2^-8. A product of two rounded operands is then ab (1 + d), |d| <= 2u + u^2, and is exact
// in float32; summing k of them in float32 adds at most k 2^-24 of the sum of magnitudes (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.5). So every element of an
// autocast product C = A B satisfies
//     |C - A B| <= (2u + u^2 + k 2^-24 (1 + 2u + u^2)) (|A| |B|)
// and each gradient (G B^T, A^T G: G and an operand rounded) the same with its own k. The test
// asserts that bound element by element (with k doubled for slack in the float32 sums), and
// that the error is above float32's (the product really ran on rounded operands).
#include <thread>

#include "nabla/ops/autocast.h"
#include "tests/helpers.h"
#include "tests/ops/autocast_helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::test;
using Catch::Matchers::Contains;

namespace {

double bf16_bound(int64_t k) {
  return 2 * kU + kU * kU + 2.0 * static_cast<double>(k) * 0x1p-24 * (1 + 2 * kU + kU * kU);
}

// Largest |actual - exact| / (bound * magnitude) over the elements (<= 1: within the bound), and
// the largest |actual - exact| / magnitude.
struct Deviation {
  double of_bound = 0, relative = 0;
};
Deviation deviation(const Tensor& actual, const Tensor& exact, const Tensor& magnitude, int64_t k) {
  REQUIRE(actual.shape() == exact.shape());
  const auto a = actual.to(kFloat64).contiguous().to_vector<double>();
  const auto e = exact.to(kFloat64).contiguous().to_vector<double>();
  const auto m = magnitude.to(kFloat64).contiguous().to_vector<double>();
  Deviation d;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - e[i]), scale = std::max(m[i], 1e-30);
    d.of_bound = std::max(d.of_bound, err / (bf16_bound(k) * scale));
    d.relative = std::max(d.relative, err / scale);
  }
  return d;
}

// One matmul case under autocast: the product and both gradients (upstream w) within the bound
// of the float64 ones; a's and b's gradients float32.
void check_matmul_case(const Tensor& a_in, const Tensor& b_in, int64_t seed) {
  INFO("a " << shape_str(a_in.shape()) << " b " << shape_str(b_in.shape()));
  Tensor a = a_in.detach().requires_grad_(), b = b_in.detach().requires_grad_();
  Tensor c;
  {
    autocast::Scope bf16;
    c = matmul(a, b);
  }
  REQUIRE(c.dtype() == kFloat32);
  const Tensor w = randn_f32(c.shape(), static_cast<uint64_t>(seed) + 100);
  sum(mul(c, w)).backward();
  REQUIRE(a.grad().dtype() == kFloat32);
  REQUIRE(b.grad().dtype() == kFloat32);

  // float64 references: the exact values and gradients, and the magnitudes |A||B|,
  // |W||B|^T, |A|^T|W| (the gradients of sum(|W| * (|A| |B|))).
  Tensor a64 = a.detach().to(kFloat64).requires_grad_();
  Tensor b64 = b.detach().to(kFloat64).requires_grad_();
  const Tensor w64 = w.to(kFloat64);
  const Tensor exact = matmul(a64, b64);
  sum(mul(exact, w64)).backward();
  Tensor am = abs(a64.detach()).requires_grad_(), bm = abs(b64.detach()).requires_grad_();
  const Tensor magnitude = matmul(am, bm);
  sum(mul(abs(w64), magnitude)).backward();
  const int64_t K = a.size(-1), out_elems = c.numel();
  const Deviation fwd = deviation(c, exact, magnitude, K);
  CHECK(fwd.of_bound <= 1.0);
  if (K > 0 && c.numel() > 0) CHECK(fwd.relative > 1e-5);  // rounded operands, not float32's
  const Deviation ga = deviation(a.grad(), a64.grad(), am.grad(), out_elems);
  const Deviation gb = deviation(b.grad(), b64.grad(), bm.grad(), out_elems);
  CHECK(ga.of_bound <= 1.0);
  CHECK(gb.of_bound <= 1.0);
}

}  // namespace

TEST_CASE("autocast: the scope nests, turns off inside, and is per thread", "[autocast]") {
  CHECK_FALSE(autocast::enabled());
  {
    autocast::Scope on;
    CHECK(autocast::enabled());
    {
      autocast::Scope off(false);
      CHECK_FALSE(autocast::enabled());
      autocast::Scope again;
      CHECK(autocast::enabled());
    }
    CHECK(autocast::enabled());
    bool other_thread = true;
    std::thread([&] { other_thread = autocast::enabled(); }).join();
    CHECK_FALSE(other_thread);
  }
  CHECK_FALSE(autocast::enabled());
}

TEST_CASE("autocast: the products run on bf16 operands, the rest stays float32", "[autocast]") {
  const Tensor a = randn_f32({6, 40}, 1), b = randn_f32({40, 5}, 2);
  const Tensor x = randn_f32({3, 4, 8}, 3), target = randn_f32({3, 4, 8}, 4);
  const Tensor labels = from_vector(std::vector<int64_t>{0, 3, 7}, {3});
  // What autocast must leave exactly as it is: float32 normalisation, softmax, losses.
  auto untouched = [&] {
    return std::vector<Tensor>{layer_norm(x, {8}),
                               softmax(x, -1),
                               log_softmax(x, -1),
                               cross_entropy(x.select(1, 0), labels),
                               mse_loss(x, target),
                               add(x, target),
                               matmul(a.to(kFloat64), b.to(kFloat64))};
  };
  const std::vector<Tensor> outside = untouched();
  const Tensor product32 = matmul(a, b);
  std::vector<Tensor> inside;
  Tensor product;
  {
    autocast::Scope bf16;
    inside = untouched();
    product = matmul(a.detach().requires_grad_(), b);
    CHECK(std::string(product.grad_fn()->name()) == "AutocastMatmulBackward");
    CHECK(autocast::applies({&a, &b}));
    const Tensor a64 = a.to(kFloat64), h = a.to(kFloat16);
    CHECK_FALSE(autocast::applies({&a64, &b}));  // float64 left alone, as PyTorch's autocast
    CHECK_FALSE(autocast::applies({&h}));
  }
  for (size_t i = 0; i < outside.size(); ++i) {
    INFO("untouched op " << i);
    CHECK(test::bit_equal(inside[i], outside[i]));
  }
  CHECK(inside.back().dtype() == kFloat64);
  // The product equals the float64 product of the bf16-rounded operands to float32 accuracy
  // (k 2^-24 relative), and differs from float32's.
  const Tensor rounded = matmul(a.to(kBFloat16).to(kFloat64), b.to(kBFloat16).to(kFloat64));
  const Tensor mag = matmul(abs(a.to(kFloat64)), abs(b.to(kFloat64)));
  CHECK(deviation(product, rounded, mag, 1).relative <= 2 * 40 * 0x1p-24);
  CHECK_FALSE(test::bit_equal(product, product32));
  CHECK(product.dtype() == kFloat32);
}

TEST_CASE("autocast: matmul forward and backward within the bf16 bound", "[autocast]") {
  check_matmul_case(randn_f32({7, 33}, 1), randn_f32({33, 9}, 2), 1);
  check_matmul_case(randn_f32({3, 5, 64}, 3), randn_f32({64, 6}, 4), 2);        // batch x 2-D
  check_matmul_case(randn_f32({2, 1, 4, 16}, 5), randn_f32({3, 16, 5}, 6), 3);  // broadcast
  check_matmul_case(randn_f32({20, 6}, 7).t(), randn_f32({8, 20}, 8).t(), 4);   // transposed
  check_matmul_case(randn_f32({4, 30}, 9).slice(1, 0, 30, 2), randn_f32({15, 3}, 10), 5);
  check_matmul_case(randn_f32({1, 12}, 11), randn_f32({12, 1}, 12), 6);   // size 1
  check_matmul_case(randn_f32({0, 12}, 13), randn_f32({12, 4}, 14), 7);   // size 0
  check_matmul_case(randn_f32({3, 0}, 15), randn_f32({0, 4}, 16), 8);     // k = 0
  check_matmul_case(randn_f32({24}, 17), randn_f32({24, 5}, 18), 9);      // 1-D left
  check_matmul_case(randn_f32({2, 6, 24}, 19), randn_f32({24}, 20), 10);  // 1-D right
  check_matmul_case(randn_f32({24}, 21), randn_f32({24}, 22), 11);        // dot
}

TEST_CASE("autocast: linear and linear_activation keep float32 master weights", "[autocast]") {
  for (auto act : {LinearActivation::ReLU, LinearActivation::GELU}) {
    nn::Linear layer(48, 20);
    const Tensor x = randn_f32({2, 5, 48}, 30);
    Tensor x32 = x.detach().requires_grad_(), x16 = x.detach().requires_grad_();
    const Tensor y32 = linear_activation(x32, layer.weight(), layer.bias(), act);
    Tensor y;
    {
      autocast::Scope bf16;
      y = linear_activation(x16, layer.weight(), layer.bias(), act);
    }
    REQUIRE(y.dtype() == kFloat32);
    CHECK(std::string(y.grad_fn()->name()) == "AutocastActivationBackward");
    // relu and gelu change a difference by at most 1.13 times (gelu's largest slope).
    const Tensor z_mag = add(matmul(abs(x.to(kFloat64)), abs(layer.weight().to(kFloat64)).t()),
                             abs(layer.bias().to(kFloat64)));
    CHECK(deviation(y, y32, mul(z_mag, 1.13), 48).of_bound <= 1.0);
    const Tensor w = randn_f32(y.shape(), 31);
    sum(mul(y32, w)).backward();
    sum(mul(y, w)).backward();
    CHECK(layer.weight().grad().dtype() == kFloat32);
    CHECK(layer.bias().grad().dtype() == kFloat32);
    // grad_x = (w * act'(z)) W: w and W rounded (2u), and for GELU act' taken at bf16 z (|z
    // gelu''(z)| <= 0.6, so u of it); 3u of the magnitudes in total, measured in norm.
    const double rel = norm_ratio(x16.grad(), x32.grad());
    CHECK(rel <= 3 * kU);
    CHECK(rel > 0);
  }
}

TEST_CASE("autocast: linear_activation's ReLU keeps a NaN and passes its gradient", "[autocast]") {
  // The mask it saves is `not z <= 0`, as relu's threshold_backward: a NaN z keeps the gradient.
  const double nan = std::nan("");
  Tensor x = from_vector<float>({static_cast<float>(nan), 1.0f}, {2, 1}).requires_grad_();
  Tensor w = from_vector<float>({2.0f, -1.0f}, {2, 1});
  Tensor y;
  {
    autocast::Scope bf16;
    y = linear_activation(x, w, Tensor(), LinearActivation::ReLU);
  }
  REQUIRE(std::string(y.grad_fn()->name()) == "AutocastActivationBackward");
  const std::vector<float> yv = y.to_vector<float>();
  CHECK(std::isnan(yv[0]));
  CHECK(yv[2] == 2.0f);
  CHECK(yv[3] == 0.0f);
  sum(y).backward();
  // grad_x = grad_z W: row 0 passes both gradients (2 - 1 = 1), row 1 keeps only w[0] = 2.
  CHECK(x.grad().to_vector<float>() == std::vector<float>{1.0f, 2.0f});
}

// On the widening path; the oneDNN path (bf16 weights in P V) is bounded in
// test_autocast_attention_conv.cpp.
TEST_CASE("autocast: attention takes bf16-rounded q, k, v; gradients reach float32", "[autocast]") {
  Tensor q = randn_f32({2, 3, 6, 8}, 40).requires_grad_(), k = randn_f32({2, 3, 7, 8}, 41);
  Tensor v = randn_f32({2, 3, 7, 8}, 42);
  auto r = [](const Tensor& t) { return t.detach().to(kBFloat16).to(kFloat32); };
  const Tensor expected = scaled_dot_product_attention(r(q), r(k), r(v));
  Tensor out;
  {
    autocast::Scope bf16;
    autocast::set_path_for_testing(autocast::Path::Widening);
    out = scaled_dot_product_attention(q, k, v);
    autocast::set_path_for_testing(std::nullopt);
  }
  CHECK(test::bit_equal(out, expected));
  sum(out).backward();
  CHECK(q.grad().dtype() == kFloat32);
}

TEST_CASE("autocast: bad input", "[autocast]") {
  autocast::Scope bf16;
  // float32 with bfloat16: both cast, as PyTorch's autocast does.
  const Tensor a = randn_f32({3, 4}, 50), b = randn_f32({4, 2}, 51).to(kBFloat16);
  CHECK(matmul(a, b).dtype() == kFloat32);
  CHECK_THROWS_WITH(matmul(a, randn_f32({5, 2}, 52)),
                    Contains("matmul") && Contains("(3, 4)") && Contains("(5, 2)"));
  CHECK_THROWS_AS(matmul(a, randn_f32({5, 2}, 52)), ShapeError);
  CHECK_THROWS_WITH(linear(a, randn_f32({2, 5}, 53)), Contains("linear") && Contains("(2, 5)"));
  // A gradient of a gradient through an autocast product says so.
  Tensor x = randn_f32({3, 4}, 54).requires_grad_();
  Tensor y = sum(matmul(x, a.t()));
  CHECK_THROWS_AS(autograd::grad({y}, {x}, {}, false, /*create_graph=*/true), AutogradError);
}

TEST_CASE("autocast: the widening path gives the same products and says so once", "[autocast]") {
  const Tensor a = randn_f32({2, 9, 70}, 60), b = randn_f32({70, 11}, 61);
  Tensor native;
  {
    autocast::Scope bf16;
    native = matmul(a, b);
    autocast::set_path_for_testing(autocast::Path::Widening);
    Tensor wide = matmul(a, b), again = matmul(a, b);
    autocast::set_path_for_testing(std::nullopt);
    // Same rounded operands; only the float32 summation order may differ.
    CHECK(deviation(wide, native, matmul(abs(a), abs(b)), 1).relative <= 2 * 70 * 0x1p-24);
  }
  CHECK(autocast::notices_printed() == 1);
}

namespace {

// Each parameter's gradient of loss(), run in float32 and under autocast (backward outside the
// scope): the losses and the largest gradient norm ratio ||g16 - g32|| / ||g32||.
template <class Loss>
std::pair<double, double> step_deviation(nn::Module& model, Loss&& loss) {
  model.zero_grad();
  const double loss32 = loss().item();
  std::vector<Tensor> grads32;
  {
    Tensor l = loss();
    l.backward();
  }
  for (const Tensor& p : model.parameters()) grads32.push_back(p.grad().clone());
  model.zero_grad();
  Tensor l16;
  {
    autocast::Scope bf16;
    l16 = loss();
  }
  l16.backward();
  double worst = 0;
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(params[i].grad().dtype() == kFloat32);
    worst = std::max(worst, norm_ratio(params[i].grad(), grads32[i]));
  }
  return {std::abs(l16.item() - loss32) / std::abs(loss32), worst};
}

}  // namespace

// A layer runs a few products in series (projections, Q K^T, P V, two FFN products), each off by
// up to 2u = 2^-7 of its magnitudes; the errors of the many summed terms mostly cancel, so a
// norm-wise 0.05 (about 6 such roundings adding up) for gradients and 0.02 for the loss.
TEST_CASE("autocast: a TransformerEncoderLayer step is close to float32", "[autocast]") {
  manual_seed(3);
  nn::TransformerEncoderLayer layer(
      {.d_model = 32, .nhead = 4, .dim_feedforward = 64, .dropout = 0.0, .batch_first = true});
  const Tensor x = randn_f32({2, 8, 32}, 70), target = randn_f32({2, 8, 32}, 71);
  const auto [loss_dev, grad_dev] =
      step_deviation(layer, [&] { return mse_loss(layer(x), target); });
  CHECK(loss_dev <= 0.02);
  CHECK(grad_dev <= 0.05);
  CHECK(grad_dev > 0);  // the products did run on rounded operands
}

TEST_CASE("autocast: a ViT step is close to float32; AdamW keeps float32 state", "[autocast]") {
  manual_seed(4);
  nn::ViTConfig vc;
  vc.image_size = 8;
  vc.patch_size = 4;
  vc.in_channels = 1;
  vc.num_classes = 3;
  vc.dim = 16;
  vc.depth = 2;
  vc.heads = 2;
  vc.mlp_dim = 32;
  nn::ViT model(vc);
  const Tensor images = randn_f32({4, 1, 8, 8}, 80);
  const Tensor labels = from_vector(std::vector<int64_t>{0, 2, 1, 2}, {4});
  const auto [loss_dev, grad_dev] =
      step_deviation(model, [&] { return cross_entropy(model(images), labels); });
  CHECK(loss_dev <= 0.02);
  CHECK(grad_dev <= 0.05);
  optim::AdamW adamw(model.parameters(), {.lr = 1e-2});
  adamw.step();  // on the autocast gradients step_deviation left
  for (const Tensor& p : model.parameters()) CHECK(p.dtype() == kFloat32);
  int64_t floating_state = 0;
  for (const auto& [name, t] : adamw.state_dict()) {
    INFO(name);
    // param_groups.* are the float64 hyperparameters; the rest is per-parameter state.
    if (!is_floating(t.dtype()) || name.rfind("param_groups.", 0) == 0) continue;
    CHECK(t.dtype() == kFloat32);
    ++floating_state;
  }
  CHECK(floating_state >= 2 * static_cast<int64_t>(model.parameters().size()));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
