// batch_norm, group_norm, rms_norm: gradcheck and gradgradcheck (float64; batched, non-contiguous,
// size-1 spatial and size-0 inputs), group_norm's fused path against its composite twin, the
// running statistics batch_norm writes, PyTorch parity (tests/fixtures/gen_norms.py) and errors.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

// The exception's type and its message.
#define CHECK_ERROR(expr, type, matcher) \
  do {                                   \
    CHECK_THROWS_AS(expr, type);         \
    CHECK_THROWS_WITH(expr, matcher);    \
  } while (0)
using test::check_parity;
using test::leaf;
using test::positive_leaf;

namespace {
const std::string kFamily = "norms";

// (N, C, *) inputs: batched, a non-contiguous one, size-1 spatial dims.
std::vector<Tensor> channel_inputs() {
  return {leaf({4, 3}, 1), leaf({2, 3, 5}, 2), leaf({2, 3, 2, 2}, 3), leaf({3, 2, 1, 1}, 4),
          leaf({3, 4, 2}, 5).detach().transpose(1, 2).requires_grad_()};
}
}  // namespace

TEST_CASE("batch_norm passes gradcheck and gradgradcheck in training and eval", "[ops][norms]") {
  for (const Tensor& x : channel_inputs()) {
    INFO("x " << shape_str(x.shape()));
    const int64_t C = x.shape()[1];
    Tensor w = leaf({C}, 7), b = leaf({C}, 8);
    auto train = [](auto& in) {
      return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-3);
    };
    CHECK_GRADCHECK(train, (std::vector<Tensor>{x, w, b}));
    CHECK_GRADGRADCHECK(train, (std::vector<Tensor>{x, w, b}));
    Tensor rm = leaf({C}, 9).detach(), rv = positive_leaf({C}, 10).detach();
    auto eval = [rm, rv](auto& in) {
      return batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-3);
    };
    CHECK_GRADCHECK(eval, (std::vector<Tensor>{x, w, b}));
  }
}

TEST_CASE("batch_norm updates the running statistics with the unbiased variance", "[ops][norms]") {
  Tensor x =
      tensor({1, 2, 3, 4, 6, 8}, kFloat64).reshape({3, 2});  // channel 0: 1 3 6; channel 1: 2 4 8
  Tensor rm = zeros({2}, kFloat64), rv = ones({2}, kFloat64);
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.5, 0.0);
  // channel 0: mean 10/3, unbiased var ((7/3)^2 + (1/3)^2 + (8/3)^2) / 2 = 57/9
  CHECK_CLOSE(rm, tensor({5.0 / 3, 7.0 / 3}, kFloat64), 1e-12, 0.0);
  CHECK_CLOSE(rv, tensor({0.5 + 0.5 * 57.0 / 9, 0.5 + 0.5 * 84.0 / 9}, kFloat64), 1e-12, 0.0);
  // Normalised with the biased variance: each channel has mean 0 and mean square 1.
  CHECK_CLOSE(mean(y, {0}), zeros({2}, kFloat64), 1e-12, 0.0);
  CHECK_CLOSE(mean(mul(y, y), {0}), ones({2}, kFloat64), 1e-12, 0.0);
  // Eval reads them: (x - rm) / sqrt(rv + eps).
  Tensor e = batch_norm(x, rm, rv);
  CHECK_CLOSE(e, div(sub(x, rm), sqrt(add(rv, 1e-5))), 1e-12, 0.0);
}

TEST_CASE("group_norm: gradcheck, and the fused path agrees with the composite", "[ops][norms]") {
  std::vector<std::pair<Tensor, int64_t>> cases = {
      {leaf({2, 4, 3}, 1), 2},    {leaf({2, 6, 2, 2}, 2), 3}, {leaf({3, 4, 2}, 3), 1},
      {leaf({2, 4, 1, 1}, 4), 2}, {leaf({2, 3}, 5), 3},  // one value per group
      {leaf({2, 4, 5}, 6), 4}};
  Tensor xt = leaf({4, 2, 3}, 8).detach().transpose(0, 2).requires_grad_();  // (3, 2, 4)
  cases.emplace_back(xt, 2);
  for (auto& [x, g] : cases) {
    INFO("x " << shape_str(x.shape()) << " groups " << g);
    const int64_t C = x.shape()[1], G = g;
    Tensor w = leaf({C}, 11), b = leaf({C}, 12);
    auto fused = [G](auto& in) { return group_norm(in[0], G, in[1], in[2], 1e-3); };
    auto composite = [G](auto& in) { return group_norm_composite(in[0], G, in[1], in[2], 1e-3); };
    std::vector<Tensor> in{x, w, b};
    CHECK_GRADCHECK(fused, in);
    CHECK_GRADGRADCHECK(fused, in);
    CHECK_GRADCHECK(composite, in);
    Tensor yf = fused(in), yc = composite(in);
    CHECK_CLOSE(yf, yc, 1e-10, 0.0);
    Tensor gout = leaf(yf.shape(), 13).detach();
    auto gf = autograd::grad({yf}, in, {gout}), gc = autograd::grad({yc}, in, {gout});
    for (size_t i = 0; i < in.size(); ++i) CHECK_CLOSE(gf[i], gc[i], 1e-10, 0.0);
  }
}

TEST_CASE("rms_norm passes gradcheck and gradgradcheck", "[ops][norms]") {
  std::vector<std::pair<Tensor, Shape>> cases = {
      {leaf({5}, 1), {5}},
      {leaf({2, 3, 4}, 2), {4}},
      {leaf({2, 3, 4}, 3), {3, 4}},
      {leaf({3, 1}, 4), {1}},
      {leaf({4, 3}, 5).detach().t().requires_grad_(), {4}}};
  for (auto& [x, ns] : cases) {
    INFO("x " << shape_str(x.shape()));
    Shape s = ns;
    Tensor w = leaf(s, 6);
    auto f = [s](auto& in) { return rms_norm(in[0], s, in[1], 1e-3); };
    CHECK_GRADCHECK(f, (std::vector<Tensor>{x, w}));
    CHECK_GRADGRADCHECK(f, (std::vector<Tensor>{x, w}));
  }
}

TEST_CASE("norms of size-0 inputs are empty and keep the graph", "[ops][norms]") {
  Tensor x = leaf({0, 3, 2}, 1), w = leaf({3}, 2), b = leaf({3}, 3);
  Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
  Tensor y = batch_norm(x, rm, rv, w, b, true);
  CHECK(y.shape() == x.shape());
  CHECK_CLOSE(rm, zeros({3}, kFloat64), 0.0, 0.0);  // no batch, no update
  CHECK(group_norm(x, 3, w, b).shape() == x.shape());
  CHECK(rms_norm(x, {2}).shape() == x.shape());
  auto train = [](auto& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); };
  CHECK_GRADCHECK(train, (std::vector<Tensor>{x, w, b}));
}

TEST_CASE("parity: batch_norm, group_norm, rms_norm", "[ops][parity][norms]") {
  for (std::string c : {"bn_train_2d", "bn_train_3d", "bn_train_4d", "bn_train_4d_spatial1"})
    check_parity(kFamily, c, [](auto& x) {
      return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-3);
    });
  check_parity(kFamily, "bn_train_plain",
               [](auto& x) { return batch_norm(x[0], Tensor(), Tensor(), {}, {}, true); });
  check_parity(kFamily, "bn_eval_4d",
               [](auto& x) { return batch_norm(x[0], x[1], x[2], x[3], x[4], false, 0.1, 1e-3); });
  check_parity(kFamily, "gn_3d", [](auto& x) { return group_norm(x[0], 2, x[1], x[2]); });
  check_parity(kFamily, "gn_4d", [](auto& x) { return group_norm(x[0], 3, x[1], x[2], 1e-3); });
  check_parity(kFamily, "gn_one_group", [](auto& x) { return group_norm(x[0], 1); });
  check_parity(kFamily, "gn_per_channel", [](auto& x) { return group_norm(x[0], 4, x[1], x[2]); });
  check_parity(kFamily, "rms_last", [](auto& x) { return rms_norm(x[0], {4}, x[1]); });
  check_parity(kFamily, "rms_two_dims", [](auto& x) { return rms_norm(x[0], {3, 4}, x[1], 1e-3); });
  check_parity(kFamily, "rms_plain", [](auto& x) { return rms_norm(x[0], {5}); });
}

TEST_CASE("norms reject bad input with clear errors", "[ops][norms]") {
  Tensor x = leaf({2, 6, 4}, 1).detach();
  Tensor c4 = ones({4}, kFloat64), c6 = ones({6}, kFloat64);
  CHECK_ERROR(batch_norm(x, c4, c4), ShapeError, Contains("running_mean") && Contains("(2, 6, 4)"));
  CHECK_ERROR(batch_norm(x, c6, c6, c4), ShapeError, Contains("weight"));
  CHECK_ERROR(batch_norm(x, Tensor(), Tensor()), ValueError, Contains("eval mode"));
  CHECK_ERROR(batch_norm(ones({1, 3}, kFloat64), Tensor(), Tensor(), {}, {}, true), ValueError,
              Contains("more than 1 value per channel") && Contains("(1, 3)"));
  CHECK_ERROR(batch_norm(ones({4}, kFloat64), Tensor(), Tensor(), {}, {}, true), ShapeError,
              Contains("(N, C, *)"));
  CHECK_ERROR(batch_norm(x, c6.to(kFloat32), c6), DTypeError, Contains("float32"));
  CHECK_ERROR(group_norm(x, 4), ValueError,
              Contains("divisible by num_groups") && Contains("num_groups=4"));
  CHECK_ERROR(group_norm(x, 0), ValueError, Contains("num_groups=0"));
  CHECK_ERROR(group_norm(x, 3, c4), ShapeError, Contains("weight"));
  CHECK_ERROR(group_norm(zeros({2, 6}, kInt64), 3), DTypeError, Contains("int64"));
  CHECK_ERROR(rms_norm(x, {6}), ShapeError, Contains("normalized_shape (6,)"));
  CHECK_ERROR(rms_norm(x, {4}, c6), ShapeError, Contains("weight"));
  CHECK_ERROR(rms_norm(x, {4}, Tensor(), -1.0), ValueError, Contains("eps"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef CHECK_ERROR
