// gradcheck of reductions, matmul and the view ops.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {
template <class F>
void check_fn(F f, std::vector<Tensor> inputs, bool second_order = true) {
  auto fn = [f](const std::vector<Tensor>& in) { return f(in); };
  CHECK_GRADCHECK(fn, inputs);
  if (second_order) CHECK_GRADGRADCHECK(fn, inputs);
}
}  // namespace

TEST_CASE("sum and mean pass gradcheck", "[ops]") {
  Tensor xt = leaf({4, 3}, 5).detach().t().requires_grad_();
  for (Tensor x : {leaf({}, 1), leaf({1, 3}, 2), leaf({2, 3, 4}, 3), leaf({0, 3}, 4), xt,
                   leaf({2, 1, 3, 2}, 6)}) {
    INFO("shape " << shape_str(x.shape()));
    check_fn([](auto& in) { return sum(in[0]); }, {x});
    check_fn([](auto& in) { return mean(in[0], {-1}, true); }, {x});
    if (x.dim() >= 2) {
      check_fn([](auto& in) { return sum(in[0], {0, -1}); }, {x});
      check_fn([](auto& in) { return mean(in[0], {1}); }, {x});
    }
  }
}

TEST_CASE("sum and mean values", "[ops]") {
  Tensor a = arange(0.0, 6.0, 1.0, kFloat32).view({2, 3});
  CHECK(sum(a).item<float>() == 15.f);
  CHECK(sum(a, {0}).to_vector<float>() == std::vector<float>{3, 5, 7});
  CHECK(sum(a, {1}, true).shape() == Shape{2, 1});
  CHECK(mean(a, {1}).to_vector<float>() == std::vector<float>{1, 4});
  CHECK(sum(zeros({0, 3})).item<float>() == 0.f);
  CHECK(std::isnan(mean(zeros({0})).item<float>()));
  CHECK(sum(arange(4)).item<int64_t>() == 6);
  CHECK_THROWS_WITH(sum(a, {2}), Contains("sum") && Contains("dim 2"));
  CHECK_THROWS_WITH(sum(a, {0, 0}), Contains("twice"));
}

TEST_CASE("matmul follows PyTorch's shape rules", "[ops]") {
  CHECK(matmul(ones({3}), ones({3})).shape() == Shape{});
  CHECK(matmul(ones({3}), ones({3})).item<float>() == 3.f);
  CHECK(matmul(ones({2, 3}), ones({3})).shape() == Shape{2});
  CHECK(matmul(ones({3}), ones({3, 4})).shape() == Shape{4});
  CHECK(matmul(ones({5, 2, 3}), ones({3, 4})).shape() == Shape{5, 2, 4});
  CHECK(matmul(ones({2, 1, 2, 3}), ones({5, 3, 4})).shape() == Shape{2, 5, 2, 4});
  CHECK(matmul(ones({2, 0}), ones({0, 3})).to_vector<float>() == std::vector<float>(6, 0.f));
  Tensor a = tensor({{1, 2}, {3, 4}}), b = tensor({{5, 6}, {7, 8}});
  CHECK(matmul(a, b).to_vector<float>() == std::vector<float>{19, 22, 43, 50});
  CHECK(matmul(a.t(), b).to_vector<float>() == std::vector<float>{26, 30, 38, 44});
  CHECK(matmul(a, b.t()).to_vector<float>() == std::vector<float>{17, 23, 39, 53});
  // A layout BLAS cannot read directly (stepped slice) is handled too.
  Tensor big = arange(0.0, 16.0, 1.0, kFloat32).view({4, 4});
  Tensor stepped = big.slice(0, 0, 4, 2).slice(1, 0, 4, 2);  // [[0, 2], [8, 10]]
  CHECK(matmul(stepped, tensor({{1, 0}, {0, 1}})).to_vector<float>() ==
        std::vector<float>{0, 2, 8, 10});
}

TEST_CASE("matmul errors name both shapes", "[ops]") {
  CHECK_THROWS_AS(matmul(ones({2, 3}), ones({2, 3})), ShapeError);
  CHECK_THROWS_WITH(matmul(ones({2, 3}), ones({2, 3})), Contains("matmul") && Contains("(2, 3)"));
  // Batch dims that do not broadcast: both full shapes, not only the batch dims.
  CHECK_THROWS_WITH(matmul(ones({2, 2, 3}), ones({3, 3, 4})),
                    Contains("matmul") && Contains("(2, 2, 3)") && Contains("(3, 3, 4)"));
  CHECK_THROWS_AS(matmul(scalar_tensor(1), ones({2})), ShapeError);
  CHECK_THROWS_AS(matmul(ones({2, 2}), ones({2, 2}, kFloat64)), DTypeError);
}

TEST_CASE("matmul passes gradcheck and gradgradcheck", "[ops]") {
  auto mm = [](auto& in) { return matmul(in[0], in[1]); };
  check_fn(mm, {leaf({3}, 1), leaf({3}, 2)});                   // dot
  check_fn(mm, {leaf({2, 3}, 3), leaf({3, 4}, 4)});             // 2-D
  check_fn(mm, {leaf({3}, 5), leaf({2, 3, 4}, 6)});             // 1-D @ batched
  check_fn(mm, {leaf({2, 1, 2, 3}, 7), leaf({3, 3, 2}, 8)});    // broadcast batch, 4-D
  check_fn(mm, {leaf({3, 2}, 9).detach().t().requires_grad_(),  // transposed operands
                leaf({4, 3}, 10).detach().t().requires_grad_()});
  check_fn(mm, {leaf({1, 3}, 11), leaf({3, 1}, 12)});  // size-1 dims
  check_fn(mm, {leaf({2, 0}, 13), leaf({0, 3}, 14)});  // zero-size K
  check_fn(mm, {leaf({0, 3}, 15), leaf({3, 2}, 16)});  // zero-size M
}

TEST_CASE("view ops pass gradcheck and gradgradcheck", "[ops]") {
  Tensor x = leaf({2, 3, 4}, 1);
  Tensor xt = leaf({4, 3, 2}, 2).detach().transpose(0, 2).requires_grad_();
  for (const Tensor& in : {x, xt}) {
    INFO((in.is_contiguous() ? "contiguous" : "transposed"));
    auto w = [](Tensor t) { return mul(t, t); };  // make the checks non-linear
    check_fn(
        [&](auto& v) {
          return w(v[0].view({6, 4}).contiguous());
        },
        {in.contiguous().detach().requires_grad_()});
    check_fn([&](auto& v) { return w(v[0].reshape({4, 6})); }, {in});
    check_fn([&](auto& v) { return w(v[0].transpose(0, 2)); }, {in});
    check_fn([&](auto& v) { return w(v[0].permute({1, 2, 0})); }, {in});
    check_fn([&](auto& v) { return w(v[0].narrow(1, 1, 2)); }, {in});
    check_fn([&](auto& v) { return w(v[0].slice(2, 0, 4, 3)); }, {in});
    check_fn([&](auto& v) { return w(v[0].select(1, -1)); }, {in});
    check_fn([&](auto& v) { return w(v[0].unsqueeze(1).expand({2, 5, 3, 4})); }, {in});
    check_fn([&](auto& v) { return w(v[0].flatten(0, 1)); }, {in});
    check_fn([&](auto& v) { return w(v[0].unsqueeze(0).squeeze(0)); }, {in});
  }
  check_fn([](auto& v) { return mul(v[0].expand({3, 4}), v[0]); }, {leaf({1, 4}, 3)});
  check_fn([](auto& v) { return mul(v[0].reshape({1}), v[0]); }, {leaf({}, 4)});
  check_fn([](auto& v) { return v[0].narrow(0, 0, 0); }, {leaf({3, 2}, 5)}, false);
}

TEST_CASE("to(dtype) sends the gradient back in the input's dtype", "[ops]") {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = sum(mul(x.to(kFloat64), 2.0));
  y.backward();
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
}

}  // namespace NABLA_UNITY_ID
}  // namespace
