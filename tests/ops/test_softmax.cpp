// softmax, log_softmax and masked_softmax: gradcheck and gradgradcheck on the standard shapes,
// agreement of the fused kernels with their composite twins, stability, masking semantics, errors.
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using SoftmaxFn = Tensor (*)(const Tensor&, int64_t);

// (input, dim) pairs: 0-d, size-1 dims, transposed, inner > 1, batched 4-D, zero-size.
std::vector<std::pair<Tensor, int64_t>> softmax_inputs() {
  Tensor t = leaf({4, 3}, 5).detach().t().requires_grad_();
  REQUIRE(!t.is_contiguous());
  return {{leaf({}, 1), 0},
          {leaf({1, 3}, 2), 1},
          {leaf({1, 3}, 2), 0},
          {t, 1},
          {t, 0},
          {leaf({2, 3, 4}, 3), 1},
          {leaf({2, 2, 3, 2}, 4), -1},
          {leaf({2, 2, 3, 2}, 4), 2},
          {leaf({0, 3}, 6), 1},
          {leaf({3, 0}, 7), 1}};
}

// Forward within 1e-6 and gradients within 1e-5 for the same random upstream gradients.
template <class F, class G>
void check_agree(F fused, G composite, const std::vector<Tensor>& inputs, uint64_t seed) {
  Tensor yf = fused(inputs), yc = composite(inputs);
  CHECK_CLOSE(yf, yc, 1e-6, 0.0);
  Generator g(seed);
  Tensor gout = randn(yf.shape(), g, yf.dtype());
  std::vector<Tensor> wrt;
  for (const Tensor& x : inputs)
    if (x.requires_grad()) wrt.push_back(x);
  auto gf = autograd::grad({yf}, wrt, {gout}, false, false, true);
  auto gc = autograd::grad({yc}, wrt, {gout}, false, false, true);
  for (size_t i = 0; i < wrt.size(); ++i) {
    INFO("gradient " << i);
    Tensor a = gf[i].defined() ? gf[i] : zeros_like(wrt[i]);
    Tensor b = gc[i].defined() ? gc[i] : zeros_like(wrt[i]);
    CHECK_CLOSE(a, b, 1e-5, 0.0);
  }
}

// A random shape of 1 to 4 dims with sizes 1..5, and a random dim of it.
std::pair<Shape, int64_t> random_shape(Generator& g) {
  const int64_t nd = 1 + static_cast<int64_t>(g.bits64(g.advance(1)) % 4);
  Shape s;
  for (int64_t d = 0; d < nd; ++d)
    s.push_back(1 + static_cast<int64_t>(g.bits64(g.advance(1)) % 5));
  return {s, static_cast<int64_t>(g.bits64(g.advance(1)) % static_cast<uint64_t>(nd))};
}

}  // namespace

TEST_CASE("softmax and log_softmax pass gradcheck and gradgradcheck", "[ops]") {
  for (auto [name, f] : std::vector<std::pair<std::string, SoftmaxFn>>{
           {"softmax", softmax},
           {"log_softmax", log_softmax},
           {"softmax_composite", softmax_composite},
           {"log_softmax_composite", log_softmax_composite}})
    for (auto& [x, dim] : softmax_inputs()) {
      INFO(name << " shape " << shape_str(x.shape()) << " dim " << dim);
      auto fn = [f = f, dim = dim](const std::vector<Tensor>& in) { return f(in[0], dim); };
      CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
      CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{x});
    }
}

TEST_CASE("fused softmax and log_softmax agree with their composite twins", "[ops]") {
  Generator g(7);
  for (int trial = 0; trial < 12; ++trial) {
    auto [shape, dim] = random_shape(g);
    INFO("shape " << shape_str(shape) << " dim " << dim);
    Tensor x = mul(randn(shape, g, kFloat64), 4.0).requires_grad_();
    check_agree([d = dim](auto& in) { return softmax(in[0], d); },
                [d = dim](auto& in) { return softmax_composite(in[0], d); }, {x}, 100 + trial);
    check_agree([d = dim](auto& in) { return log_softmax(in[0], d); },
                [d = dim](auto& in) { return log_softmax_composite(in[0], d); }, {x}, 200 + trial);
  }
}

TEST_CASE("softmax values and stability at logits of magnitude 1e4", "[ops]") {
  Tensor x = tensor({{1, 2, 3}, {0, 0, 0}}, kFloat64);
  Tensor y = softmax(x, 1);
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), z = 1 + e1 + e2;
  CHECK_CLOSE(y, tensor({{1 / z, e1 / z, e2 / z}, {1.0 / 3, 1.0 / 3, 1.0 / 3}}, kFloat64), 1e-15,
              0);
  CHECK_CLOSE(sum(softmax(x, 0), {0}), ones({3}, kFloat64), 1e-15, 0);
  CHECK(softmax(scalar_tensor(3.0), 0).item<float>() == 1.0f);
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    Tensor big = tensor({1e4, 1e4 - 1, -1e4}, dt);
    const double p0 = 1 / (1 + std::exp(-1.0)), p1 = std::exp(-1.0) / (1 + std::exp(-1.0));
    CHECK_CLOSE(softmax(big, 0), tensor({p0, p1, 0.0}, dt), 1e-7, 1e-6);
    // log_softmax stays finite where softmax underflows to 0.
    CHECK_CLOSE(log_softmax(big, 0),
                tensor({std::log(p0), std::log(p1), -2e4 - std::log1p(std::exp(-1.0))}, dt), 1e-6,
                1e-6);
  }
  // A row of only -inf gives NaN (as in PyTorch); a partial -inf row is fine.
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(std::isnan(softmax(tensor({-inf, -inf}, kFloat64), 0).to_vector<double>()[0]));
  CHECK(softmax(tensor({-inf, 0.0}, kFloat64), 0).to_vector<double>() == std::vector<double>{0, 1});
}

TEST_CASE("masked_softmax with valid_lens follows d2l", "[ops]") {
  // d2l: masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))
  Generator g(3);
  Tensor x = rand({2, 2, 4}, g);
  Tensor y = masked_softmax(x, from_vector<int64_t>({2, 3}, {2}));
  auto v = y.to_vector<float>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t q = 0; q < 2; ++q) {
      float row_sum = 0;
      for (int64_t k = 0; k < 4; ++k) {
        const float p = v[static_cast<size_t>((b * 2 + q) * 4 + k)];
        row_sum += p;
        if (k >= 2 + b)
          CHECK(p == 0.0f);
        else
          CHECK(p > 0.0f);
      }
      CHECK(row_sum == Approx(1.0f).epsilon(1e-6));
    }
  // Same as softmax over the kept prefix.
  CHECK_CLOSE(y.select(0, 1).slice(1, 0, 3), softmax(x.select(0, 1).slice(1, 0, 3), -1), 1e-7, 0);

  // Per-query lengths (B, Q), on a 4-D x (B, H, Q, K): broadcast over heads.
  Tensor x4 = rand({2, 3, 2, 4}, g);
  Tensor y4 = masked_softmax(x4, from_vector<int64_t>({1, 4, 2, 3}, {2, 2}));
  CHECK(y4.select(0, 0).select(1, 0).slice(1, 1, 4).to_vector<float>() ==
        std::vector<float>(9, 0.0f));
  CHECK_CLOSE(y4.select(0, 1).select(1, 1).slice(1, 0, 3),
              softmax(x4.select(0, 1).select(1, 1).slice(1, 0, 3), -1), 1e-7, 0);
  CHECK_CLOSE(sum(y4, {-1}), ones({2, 3, 2}), 1e-6, 0);
}

TEST_CASE("masked_softmax: a fully masked row is zeros with zero gradient, never NaN", "[ops]") {
  // NOTE: d2l would return a uniform row here (it writes -1e6 into masked logits); we return 0.
  Tensor x = leaf({2, 3, 4}, 1);
  Tensor y = masked_softmax(x, from_vector<int64_t>({0, 2}, {2}));
  CHECK(y.select(0, 0).to_vector<double>() == std::vector<double>(12, 0.0));
  Generator g(5);
  auto grads = autograd::grad({y}, {x}, {randn({2, 3, 4}, g, kFloat64)});
  auto gv = grads[0].select(0, 0).to_vector<double>();
  CHECK(gv == std::vector<double>(12, 0.0));
  for (double v : grads[0].to_vector<double>()) CHECK(std::isfinite(v));
  // All -inf additive row, and an all-false bool row.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor add_mask = tensor({{-inf, -inf, -inf}, {0, -inf, 0}}, kFloat64);
  Tensor ya = masked_softmax(leaf({2, 3}, 2), add_mask, MaskKind::Additive);
  CHECK(ya.to_vector<double>()[0] == 0.0);
  CHECK(ya.to_vector<double>()[4] == 0.0);
  CHECK(sum(ya).item<double>() == Approx(1.0));
  Tensor yb =
      masked_softmax(leaf({2, 3}, 3), tensor({{0, 0, 0}, {1, 1, 0}}).to(kBool), MaskKind::Bool);
  CHECK(sum(yb.select(0, 0)).item<double>() == 0.0);
  CHECK(sum(yb.select(0, 1)).item<double>() == Approx(1.0));
}

TEST_CASE("masked_softmax passes gradcheck and agrees with its composite twin", "[ops]") {
  const double inf = std::numeric_limits<double>::infinity();
  Generator g(11);
  Tensor xt = leaf({4, 3}, 5).detach().t().requires_grad_();
  Tensor add_mask = randn({3, 4}, g, kFloat64);
  add_mask.select(0, 1).fill_(-inf);  // a fully masked row
  add_mask.select(1, 2).fill_(-inf);
  add_mask.requires_grad_();
  Tensor bool_mask = gt(rand({2, 1, 4}, g, kFloat64), 0.4);
  struct Case {
    Tensor x, mask;
    MaskKind kind;
  };
  std::vector<Case> cases = {
      {leaf({2, 3, 4}, 1), add_mask, MaskKind::Additive},
      {leaf({2, 3, 4}, 2), bool_mask, MaskKind::Bool},
      {xt, gt(rand({4}, g, kFloat64), 0.3), MaskKind::Bool},
      {leaf({1, 1, 4}, 3), tensor({1, 0, 1, 0}).to(kBool), MaskKind::Bool},
      {leaf({2, 2, 3, 4}, 4), bool_mask.unsqueeze(1), MaskKind::Bool},
      {leaf({0, 3, 4}, 6), bool_mask.select(0, 0), MaskKind::Bool},
  };
  for (auto& c : cases) {
    INFO("x " << shape_str(c.x.shape()) << " mask " << shape_str(c.mask.shape()));
    Tensor mask = c.mask;
    MaskKind kind = c.kind;
    std::vector<Tensor> in = {c.x};
    if (kind == MaskKind::Additive) in.push_back(mask);
    auto fused = [=](const std::vector<Tensor>& v) {
      return masked_softmax(v[0], v.size() > 1 ? v[1] : mask, kind);
    };
    auto composite = [=](const std::vector<Tensor>& v) {
      return masked_softmax_composite(v[0], v.size() > 1 ? v[1] : mask, kind);
    };
    if (kind == MaskKind::Bool) {  // gradcheck perturbs inputs: keep -inf masks out of it
      CHECK_GRADCHECK(fused, in);
      CHECK_GRADGRADCHECK(fused, in);
      CHECK_GRADGRADCHECK(composite, in);
    }
    check_agree(fused, composite, in, 7);
  }
  // Additive masks without -inf are fine for gradcheck (gradients flow to the mask too).
  std::vector<Tensor> in = {leaf({2, 3, 4}, 8), leaf({3, 4}, 9)};
  auto fn = [](const std::vector<Tensor>& v) {
    return masked_softmax(v[0], v[1], MaskKind::Additive);
  };
  CHECK_GRADCHECK(fn, in);
  CHECK_GRADGRADCHECK(fn, in);
  // valid_lens path against the composite with the equivalent bool mask.
  Tensor x = leaf({2, 3, 5}, 10);
  Tensor lens = from_vector<int64_t>({0, 5, 2, 1, 3, 4}, {2, 3});
  auto mask_fn = [](const std::vector<Tensor>& v) {
    return masked_softmax(v[0], from_vector<int64_t>({0, 5, 2, 1, 3, 4}, {2, 3}));
  };
  CHECK_GRADCHECK(mask_fn, std::vector<Tensor>{x});
  Tensor keep = lt(arange(5).view({1, 1, 5}), lens.unsqueeze(-1));
  check_agree(
      mask_fn, [keep](auto& v) { return masked_softmax_composite(v[0], keep, MaskKind::Bool); },
      {x}, 9);
}

TEST_CASE("softmax family errors name the op, shapes and dtypes", "[ops]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(softmax(x, 2), ShapeError);
  CHECK_THROWS_WITH(softmax(x, 2), Contains("softmax") && Contains("dim 2"));
  CHECK_THROWS_WITH(log_softmax(x, -3), Contains("log_softmax") && Contains("dim -3"));
  CHECK_THROWS_AS(softmax(arange(3), 0), DTypeError);
  CHECK_THROWS_WITH(log_softmax(arange(3), 0), Contains("log_softmax") && Contains("int64"));

  Tensor x3 = zeros({2, 3, 4});
  CHECK_THROWS_AS(masked_softmax(x3, zeros({2})), DTypeError);
  CHECK_THROWS_WITH(masked_softmax(x3, zeros({2})),
                    Contains("masked_softmax") && Contains("float32"));
  CHECK_THROWS_AS(masked_softmax(x3, from_vector<int64_t>({1, 2, 3}, {3})), ShapeError);
  CHECK_THROWS_WITH(masked_softmax(x3, from_vector<int64_t>({1, 2, 3}, {3})),
                    Contains("masked_softmax") && Contains("(3,)") && Contains("(2, 3, 4)"));
  CHECK_THROWS_WITH(masked_softmax(x3, from_vector<int64_t>({1, 2, 3, 4}, {2, 2})),
                    Contains("(2, 2)") && Contains("(2, 3, 4)"));
  CHECK_THROWS_AS(masked_softmax(x3, from_vector<int64_t>({1, -1}, {2})), ValueError);
  CHECK_THROWS_WITH(masked_softmax(x3, from_vector<int64_t>({1, -1}, {2})), Contains("-1"));
  CHECK_THROWS_AS(masked_softmax(x3, zeros({2, 3, 4}), MaskKind::Bool), DTypeError);
  CHECK_THROWS_AS(masked_softmax(x3, zeros({2, 3, 4}, kFloat64), MaskKind::Additive), DTypeError);
  CHECK_THROWS_AS(masked_softmax(x3, zeros({5}).to(kBool), MaskKind::Bool), ShapeError);
  CHECK_THROWS_WITH(
      masked_softmax(x3, zeros({2, 3, 4, 1}), MaskKind::Additive),
      Contains("masked_softmax") && Contains("(2, 3, 4, 1)") && Contains("(2, 3, 4)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
