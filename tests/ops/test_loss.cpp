// Losses: gradcheck and gradgradcheck over the standard shapes and options, agreement of the
// fused ops with their composite twins, PyTorch's reduction rules, stability and errors.
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

void check_grads(const DifferentiableFn& fn, const std::vector<Tensor>& in) {
  CHECK_GRADCHECK(fn, in);
  CHECK_GRADGRADCHECK(fn, in);
}

// Forward within 1e-6 and gradients within 1e-5 for the same random upstream gradient.
void check_agree(const DifferentiableFn& fused, const DifferentiableFn& composite,
                 const std::vector<Tensor>& in, uint64_t seed) {
  Tensor yf = fused(in), yc = composite(in);
  CHECK_CLOSE(yf, yc, 1e-6, 0.0);
  Generator g(seed);
  Tensor gout = randn(yf.shape(), g, yf.dtype());
  std::vector<Tensor> wrt;
  for (const Tensor& x : in)
    if (x.requires_grad()) wrt.push_back(x);
  auto gf = autograd::grad({yf}, wrt, {gout}, false, false, true);
  auto gc = autograd::grad({yc}, wrt, {gout}, false, false, true);
  for (size_t i = 0; i < wrt.size(); ++i) {
    INFO("gradient " << i);
    CHECK_CLOSE(gf[i], gc[i], 1e-5, 0.0);
  }
}

Tensor targets(const std::vector<int64_t>& v, const Shape& s) { return from_vector(v, s); }

struct CeCase {
  Tensor logits, target;
};

// logits/targets: unbatched, size-1 dims, transposed logits, 3-D and 4-D, zero-size batch.
std::vector<CeCase> ce_cases() {
  Tensor lt_ = leaf({5, 4}, 5).detach().t().requires_grad_();  // (4, 5), non-contiguous
  return {
      {leaf({5}, 1), from_vector<int64_t>({3}, {})},
      {leaf({1, 1}, 2), targets({0}, {1})},
      {leaf({1, 4}, 3), targets({2}, {1})},
      {lt_, targets({4, -100, 0, 2}, {4})},
      {leaf({2, 3, 4}, 6), targets({0, 1, 2, 2, -100, 0, 1, 1}, {2, 4})},
      {leaf({2, 3, 2, 2}, 7), targets({0, 1, 2, 2, 1, 0, 1, 1}, {2, 2, 2})},
      {leaf({0, 3}, 8), targets({}, {0})},
  };
}

}  // namespace

TEST_CASE("cross_entropy (index targets) passes gradcheck and gradgradcheck", "[ops]") {
  for (auto& c : ce_cases())
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
      for (double eps : {0.0, 0.15}) {
        if (c.logits.numel() == 0 && r == Reduction::Mean) continue;  // NaN, see below
        INFO("logits " << shape_str(c.logits.shape()) << " reduction " << int(r) << " eps " << eps);
        Tensor t = c.target;
        CrossEntropyOptions o{.label_smoothing = eps, .reduction = r};
        check_grads([t, o](auto& in) { return cross_entropy(in[0], t, o); }, {c.logits});
      }
}

TEST_CASE("cross_entropy (probability targets) gradients for logits and targets", "[ops]") {
  Tensor zt = leaf({4, 3}, 1).detach().t().requires_grad_();
  std::vector<std::pair<Tensor, Tensor>> cases = {
      {leaf({5}, 2), leaf({5}, 3)},
      {leaf({1, 3}, 4), leaf({1, 3}, 5)},
      {zt, leaf({3, 4}, 6)},
      {leaf({2, 3, 2}, 7), leaf({2, 3, 2}, 8)},
      {leaf({0, 3}, 9), leaf({0, 3}, 10)},
  };
  for (auto& [z, p] : cases)
    for (Reduction r : {Reduction::Mean, Reduction::None})
      for (double eps : {0.0, 0.1}) {
        if (z.numel() == 0 && r == Reduction::Mean) continue;
        INFO("logits " << shape_str(z.shape()) << " reduction " << int(r) << " eps " << eps);
        CrossEntropyOptions o{.label_smoothing = eps, .reduction = r};
        check_grads([o](auto& in) { return cross_entropy(in[0], in[1], o); }, {z, p});
      }
}

TEST_CASE("nll_loss, mse_loss and bce_with_logits pass gradcheck and gradgradcheck", "[ops]") {
  for (auto& c : ce_cases())
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      if (c.logits.numel() == 0 && r == Reduction::Mean) continue;
      INFO("nll input " << shape_str(c.logits.shape()) << " reduction " << int(r));
      Tensor t = c.target;
      NllLossOptions o{.reduction = r};
      check_grads([t, o](auto& in) { return nll_loss(in[0], t, o); }, {c.logits});
    }
  Tensor at = leaf({4, 3}, 1).detach().t().requires_grad_();
  std::vector<std::pair<Tensor, Tensor>> pairs = {
      {leaf({}, 2), leaf({}, 3)},
      {leaf({1, 3}, 4), leaf({1, 3}, 5)},
      {at, leaf({3, 4}, 6)},
      {leaf({2, 1, 3, 2}, 7), leaf({2, 1, 3, 2}, 8)},
      {leaf({0, 3}, 9), leaf({0, 3}, 10)},
  };
  for (auto& [a, b] : pairs)
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      if (a.numel() == 0 && r == Reduction::Mean) continue;
      INFO("shape " << shape_str(a.shape()) << " reduction " << int(r));
      check_grads([r](auto& in) { return mse_loss(in[0], in[1], r); }, {a, b});
      check_grads([r](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], r); },
                  {a, b});
      if (a.dim() >= 1) {
        Tensor pw = test::positive_leaf({a.size(-1)}, 11);
        check_grads(
            [r](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], r, in[2]); },
            {a, b, pw});
      }
    }
}

TEST_CASE("fused losses agree with their composite twins", "[ops]") {
  Generator g(21);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t N = 1 + trial % 3, C = 2 + trial, D = trial % 2 == 0 ? 1 : 3;
    INFO("N " << N << " C " << C << " D " << D);
    Tensor z = mul(randn({N, C, D}, g, kFloat64), 3.0).requires_grad_();
    Tensor t = randint(0, C, {N, D}, g);
    t.view({-1}).select(0, 0).fill_(-100.0);
    Tensor p = softmax(randn({N, C, D}, g, kFloat64), 1).requires_grad_();
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      CrossEntropyOptions o{.label_smoothing = 0.05 * trial, .reduction = r};
      if (!(r == Reduction::Mean && N * D == 1))  // everything ignored: NaN on both sides
        check_agree([t, o](auto& in) { return cross_entropy(in[0], t, o); },
                    [t, o](auto& in) { return cross_entropy_composite(in[0], t, o); }, {z}, 1);
      check_agree([o](auto& in) { return cross_entropy(in[0], in[1], o); },
                  [o](auto& in) { return cross_entropy_composite(in[0], in[1], o); }, {z, p}, 2);
      Tensor b = randn({N, C, D}, g, kFloat64).requires_grad_();
      check_agree([r](auto& in) { return mse_loss(in[0], in[1], r); },
                  [r](auto& in) { return mse_loss_composite(in[0], in[1], r); }, {z, b}, 3);
      Tensor pw = add(rand({D}, g, kFloat64), 0.5).requires_grad_();
      check_agree(
          [r](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], r, in[2]); },
          [r](auto& in) {
            return binary_cross_entropy_with_logits_composite(in[0], in[1], r, in[2]);
          },
          {z, p, pw}, 4);
    }
  }
}

TEST_CASE("loss values follow PyTorch's reduction rules", "[ops]") {
  Tensor z = tensor({{1, 2, 3}, {0, 0, 0}, {3, 1, -1}}, kFloat64);
  Tensor t = targets({2, -100, 0}, {3});
  Tensor lp = log_softmax(z, 1);
  const double l0 = -lp.to_vector<double>()[2], l2 = -lp.to_vector<double>()[6];
  // Mean over the non-ignored targets only.
  CHECK(cross_entropy(z, t).item<double>() == Approx((l0 + l2) / 2).epsilon(1e-14));
  CHECK(nll_loss(lp, t).item<double>() == Approx((l0 + l2) / 2).epsilon(1e-14));
  CHECK(cross_entropy(z, t, {.reduction = Reduction::Sum}).item<double>() ==
        Approx(l0 + l2).epsilon(1e-14));
  CHECK(cross_entropy(z, t, {.reduction = Reduction::None}).to_vector<double>()[1] == 0.0);
  // Everything ignored: 0 / 0 = NaN under Mean, as in PyTorch.
  CHECK(std::isnan(cross_entropy(z, targets({-100, -100, -100}, {3})).item<double>()));
  // A custom ignore_index; index -100 is then an error.
  CHECK(cross_entropy(z, targets({2, 1, 0}, {3}), {.ignore_index = 1}).item<double>() ==
        Approx((l0 + l2) / 2).epsilon(1e-14));
  CHECK_THROWS_AS(cross_entropy(z, t, {.ignore_index = 1}), IndexError);
  // Label smoothing: (1 - eps) nll + eps * mean over classes of -log p.
  const double eps = 0.3;
  auto lpv = lp.to_vector<double>();
  const double s0 = -(lpv[0] + lpv[1] + lpv[2]) / 3, s2 = -(lpv[6] + lpv[7] + lpv[8]) / 3;
  CHECK(cross_entropy(z, t, {.label_smoothing = eps}).item<double>() ==
        Approx(((1 - eps) * l0 + eps * s0 + (1 - eps) * l2 + eps * s2) / 2).epsilon(1e-14));
  // Probability targets equal to one-hot rows give the index loss.
  Tensor onehot = tensor({{0, 0, 1}, {1, 0, 0}}, kFloat64);
  CHECK(cross_entropy(z.slice(0, 1, 3), onehot).item<double>() ==
        Approx(cross_entropy(z.slice(0, 1, 3), targets({2, 0}, {2})).item<double>()));
  CHECK(mse_loss(tensor({1, 2}), tensor({2, 4})).item<float>() == 2.5f);
  CHECK(mse_loss(tensor({1, 2}), tensor({2, 4}), Reduction::Sum).item<float>() == 5.0f);
  // BCE at x = 0: log 2, and the gradient is sigmoid(0) - t exactly (the composite's relu/abs
  // form would give the wrong subgradient there).
  Tensor x0 = zeros({2}, kFloat64).requires_grad_();
  Tensor l = binary_cross_entropy_with_logits(x0, tensor({1, 0}, kFloat64), Reduction::Sum);
  CHECK(l.item<double>() == Approx(2 * std::log(2.0)).epsilon(1e-15));
  l.backward();
  CHECK(x0.grad().to_vector<double>() == std::vector<double>{-0.5, 0.5});
}

TEST_CASE("losses are finite and exact at logits of magnitude 1e4", "[ops]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    Tensor z = tensor({{1e4, -1e4, 0}, {-1e4, 1e4, 1e4 - 2}}, dt).requires_grad_();
    Tensor per = cross_entropy(z, targets({0, 2}, {2}), {.reduction = Reduction::None});
    CHECK_CLOSE(per, tensor({0.0, 2 + std::log1p(std::exp(-2.0))}, dt), 1e-6, 1e-6);
    sum(per).backward();
    const double s = 1 / (1 + std::exp(-2.0));
    CHECK_CLOSE(z.grad(), tensor({{0.0, 0.0, 0.0}, {0.0, s, -s}}, dt), 1e-6, 1e-6);
    Tensor x = tensor({1e4, -1e4, 1e4, -1e4}, dt);
    CHECK_CLOSE(binary_cross_entropy_with_logits(x, tensor({1, 0, 0, 1}, dt), Reduction::None),
                tensor({0.0, 0.0, 1e4, 1e4}, dt), 1e-6, 1e-6);
  }
}

TEST_CASE("loss errors name the op, index, class count, shapes and dtypes", "[ops]") {
  Tensor z = zeros({2, 5});
  CHECK_THROWS_AS(cross_entropy(z, targets({1, 7}, {2})), IndexError);
  CHECK_THROWS_WITH(cross_entropy(z, targets({1, 7}, {2})),
                    Contains("cross_entropy") && Contains("index 7") && Contains("5 classes"));
  CHECK_THROWS_WITH(cross_entropy(z, targets({-3, 0}, {2})), Contains("index -3"));
  CHECK_THROWS_WITH(nll_loss(z, targets({5, 0}, {2})),
                    Contains("nll_loss") && Contains("index 5") && Contains("5 classes"));
  CHECK_THROWS_AS(cross_entropy(z, targets({1, 2, 3}, {3})), ShapeError);
  CHECK_THROWS_WITH(cross_entropy(z, targets({1, 2, 3}, {3})),
                    Contains("cross_entropy") && Contains("(3,)") && Contains("(2, 5)"));
  CHECK_THROWS_WITH(cross_entropy(zeros({2, 3, 4}), targets({0, 0, 0}, {1, 3})),
                    Contains("(1, 3)") && Contains("(2, 4)"));
  CHECK_THROWS_AS(cross_entropy(z, zeros({2, 5}, kFloat64)), DTypeError);
  CHECK_THROWS_WITH(cross_entropy(z, zeros({2, 4})),
                    Contains("cross_entropy") && Contains("(2, 4)") && Contains("(2, 5)"));
  CHECK_THROWS_AS(cross_entropy(z, zeros({2}).to(kBool)), DTypeError);
  CHECK_THROWS_AS(cross_entropy(arange(4), targets({0}, {})), DTypeError);
  CHECK_THROWS_AS(cross_entropy(scalar_tensor(1.0), targets({0}, {})), ShapeError);
  CHECK_THROWS_AS(cross_entropy(z, targets({1, 2}, {2}), {.label_smoothing = 1.5}), ValueError);
  CHECK_THROWS_WITH(mse_loss(zeros({2, 3}), zeros({3})),
                    Contains("mse_loss") && Contains("(2, 3)") && Contains("(3,)"));
  CHECK_THROWS_WITH(mse_loss(zeros({2}), zeros({2}, kFloat64)),
                    Contains("mse_loss") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_WITH(
      binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), Reduction::Mean, zeros({2})),
      Contains("binary_cross_entropy_with_logits") && Contains("(2,)") && Contains("(2, 3)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
