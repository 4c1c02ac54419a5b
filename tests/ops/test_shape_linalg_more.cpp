// The ops of shape_more.h, reduce_more.h, scatter.h, linalg_more.h, einsum.h and interpolate.h:
// values against hand-computed results, the gradient conventions (zeros in prod, ties in amax),
// and nonzero (not differentiable, so not in the op database). Gradcheck over layouts, sizes
// 0 and 1 and broadcasting is in tests/op_db/ops_shape_more.cpp and ops_linalg_more.cpp;
// PyTorch parity in test_parity_shape_linalg_more.cpp.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

std::vector<double> doubles(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }
std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

Tensor grad_of(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  Tensor xl = x.detach().requires_grad_();
  sum(f(xl)).backward();
  return xl.grad();
}

}  // namespace

TEST_CASE("flip roll tile unbind movedim values", "[ops]") {
  Tensor x = arange(6).view({2, 3});
  CHECK(ints(flip(x, {1})) == std::vector<int64_t>{2, 1, 0, 5, 4, 3});
  CHECK(ints(flip(x, {0, 1})) == std::vector<int64_t>{5, 4, 3, 2, 1, 0});
  CHECK(ints(roll(x, {1}, {1})) == std::vector<int64_t>{2, 0, 1, 5, 3, 4});
  CHECK(ints(roll(x, {-1}, {1})) == std::vector<int64_t>{1, 2, 0, 4, 5, 3});
  CHECK(ints(roll(x, {2})) == std::vector<int64_t>{4, 5, 0, 1, 2, 3});
  CHECK(ints(tile(x, {2})) == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  CHECK(tile(x, {2, 1, 1}).shape() == Shape{2, 2, 3});
  auto pieces = unbind(x, 1);
  REQUIRE(pieces.size() == 3);
  CHECK(ints(pieces[2]) == std::vector<int64_t>{2, 5});
  CHECK(movedim(ones({2, 3, 4, 5}), {0, 3}, {2, 0}).shape() == Shape{5, 3, 2, 4});
  CHECK(movedim(ones({2, 3, 4}), -1, 0).shape() == Shape{4, 2, 3});
  // flip and roll copy even when nothing moves.
  Tensor same = roll(x, {3}, {1});
  same.fill_(9);
  CHECK(ints(x)[0] == 0);
}

TEST_CASE("prod: gradient with zeros", "[ops]") {
  auto row_prod = [](const Tensor& t) { return prod(t, 1); };
  // No zero: prod / x. One zero: only the zero gets the product of the others. Two: all zero.
  Tensor x = tensor({{2, 3, 4}, {2, 0, 5}, {0, 3, 0}}, kFloat64);
  CHECK(doubles(grad_of(x, row_prod)) == std::vector<double>{12, 8, 6, 0, 10, 0, 0, 0, 0});
  CHECK(prod(zeros({0})).item() == 1.0);
  CHECK(ints(prod(arange(1, 5, 1), 0)) == std::vector<int64_t>{24});
  // The create_graph form (the ones-on-the-diagonal matrix) agrees, and differentiates again.
  Tensor xl = x.detach().requires_grad_();
  Tensor g = autograd::grad({sum(prod(xl, 1))}, {xl}, {}, false, true)[0];
  CHECK(doubles(g) == std::vector<double>{12, 8, 6, 0, 10, 0, 0, 0, 0});
  CHECK_GRADGRADCHECK(
      [](const std::vector<Tensor>& v) { return prod(v[0], 1); },
      std::vector<Tensor>{tensor({{2, 3, 4}, {2, 0, 5}}, kFloat64).requires_grad_()});
}

TEST_CASE("amax / amin: ties split the gradient", "[ops]") {
  Tensor x = tensor({{1, 3, 3}, {2, 2, 2}}, kFloat64);
  CHECK(doubles(amax(x, {1})) == std::vector<double>{3, 2});
  CHECK(doubles(amin(x)) == std::vector<double>{1});
  const double third = 1.0 / 3.0;
  CHECK(doubles(grad_of(x, [](const Tensor& t) { return amax(t, {1}); })) ==
        std::vector<double>{0, 0.5, 0.5, third, third, third});
  // max(x, dim) sends it all to one index instead.
  CHECK(doubles(grad_of(x, [](const Tensor& t) { return max(t, 1).values; })) ==
        std::vector<double>{0, 1, 0, 1, 0, 0});
  CHECK(std::isnan(amax(tensor({1, NAN, 3})).item()));
  CHECK(std::isnan(amin(tensor({NAN, 1, 3})).item()));
}

TEST_CASE("scatter masked_select nonzero values", "[ops]") {
  Tensor x = zeros({2, 3});
  Tensor index = from_vector<int64_t>({2, 0, 1, 1}, {2, 2});
  Tensor src = tensor({{1, 2}, {3, 4}});
  CHECK(doubles(scatter(x, 1, index, src)) == std::vector<double>{2, 0, 1, 0, 4, 0});
  CHECK(doubles(scatter(x, 1, index, 7.0)) == std::vector<double>{7, 0, 7, 0, 7, 0});
  // The overwritten elements of x get no gradient.
  CHECK(doubles(grad_of(ones({2, 3}, kFloat64), [&](const Tensor& t) {
          return scatter(t, 1, index, 7.0);
        })) == std::vector<double>{0, 1, 0, 1, 0, 1});
  CHECK_THROWS_AS(scatter(x, 1, from_vector<int64_t>({3}, {1, 1}), 0.0), IndexError);
  CHECK_THROWS_WITH(scatter(x, 1, from_vector<int64_t>({3}, {1, 1}), 0.0),
                    Contains("scatter") && Contains("index 3") && Contains("size 3"));

  Tensor m = from_vector<bool>({true, false, true}, {3});
  CHECK(doubles(masked_select(tensor({{1, 2, 3}, {4, 5, 6}}), m)) ==
        std::vector<double>{1, 3, 4, 6});
  CHECK(masked_select(ones({2, 3}), zeros({3}, kBool)).shape() == Shape{0});

  Tensor nz = nonzero(tensor({{0, 1.5, 0}, {2, 0, -1}}));
  CHECK(nz.shape() == Shape{3, 2});
  CHECK(ints(nz) == std::vector<int64_t>{0, 1, 1, 0, 1, 2});
  CHECK(nonzero(ones({0, 2})).shape() == Shape{0, 2});
  CHECK(nonzero(scalar_tensor(3)).shape() == Shape{1, 0});
  CHECK(nonzero(scalar_tensor(0)).shape() == Shape{0, 0});
  CHECK(ints(nonzero(from_vector<bool>({false, true}, {2}))) == std::vector<int64_t>{1});
}

TEST_CASE("bmm addmm outer einsum agree with matmul", "[ops]") {
  Tensor a = leaf({2, 3, 4}, 1), b = leaf({2, 4, 5}, 2), c = leaf({3, 5}, 3);
  CHECK_CLOSE(bmm(a, b), matmul(a, b), 0, 0);
  CHECK_CLOSE(einsum("bij,bjk->bik", {a, b}), matmul(a, b), 1e-12, 1e-12);
  CHECK_CLOSE(einsum("bij,bjk->bki", {a, b}), matmul(a, b).transpose(1, 2), 1e-12, 1e-12);
  CHECK_CLOSE(einsum("ii", {c.narrow(1, 0, 3)}),
              sum(mul(c.narrow(1, 0, 3), eq(arange(3).unsqueeze(1), arange(3)).to(kFloat64))),
              1e-12, 1e-12);
  CHECK_CLOSE(addmm(c, a.select(0, 0), b.select(0, 1), 0.5, 2.0),
              add(mul(c, 0.5), mul(matmul(a.select(0, 0), b.select(0, 1)), 2.0)), 1e-12, 1e-12);
  CHECK(ints(outer(arange(3), arange(2))) == std::vector<int64_t>{0, 0, 0, 1, 0, 2});
  CHECK_THROWS_WITH(bmm(ones({2, 3, 4}), ones({2, 5, 2})),
                    Contains("bmm") && Contains("(2, 3, 4)") && Contains("(2, 5, 2)"));
  CHECK_THROWS_WITH(einsum("ij,jk->ik", {ones({2, 3}), ones({4, 2})}),
                    Contains("einsum") && Contains("'j'") && Contains("size 4"));
}

TEST_CASE("cosine_similarity normalize interpolate values", "[ops]") {
  CHECK(cosine_similarity(tensor({{1, 0}}), tensor({{0, 2}})).item() == 0.0);
  CHECK(cosine_similarity(tensor({{3, 4}}), tensor({{6, 8}})).item() == Approx(1.0));
  CHECK(doubles(normalize(tensor({{3, 4}}, kFloat64))) == std::vector<double>{0.6, 0.8});
  CHECK(doubles(normalize(tensor({{0, 0}}, kFloat64))) == std::vector<double>{0, 0});
  Tensor img = arange(0, 4, 1, kFloat64).view({1, 1, 2, 2});
  CHECK(doubles(interpolate(img, {.scale_factor = {2.0}})) ==
        std::vector<double>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3});
  // align_corners: the corners stay, the middle is their mean.
  CHECK_CLOSE(interpolate(img, {.size = {3, 3}, .mode = "bilinear", .align_corners = true}),
              tensor({{0, 0.5, 1}, {1, 1.5, 2}, {2, 2.5, 3}}, kFloat64).view({1, 1, 3, 3}), 1e-15,
              0);
  // Same size: the identity, both modes.
  CHECK_CLOSE(interpolate(img, {.size = {2, 2}, .mode = "bilinear"}), img, 0, 0);
  CHECK_THROWS_WITH(interpolate(ones({1, 2, 2}), {.size = {3}}),
                    Contains("interpolate") && Contains("(1, 2, 2)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
