// Indexing ops (index_select index_add gather scatter_add one_hot): values, gradients with
// duplicate indices, gradcheck + gradgradcheck, and error messages.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void check_grads(const Fn& fn, const std::vector<Tensor>& inputs) {
  CHECK_GRADCHECK(fn, inputs);
  CHECK_GRADGRADCHECK(fn, inputs);
}

Tensor idx(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }
Tensor idx(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return from_vector<int64_t>(v, {n});
}
std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

Tensor transposed_leaf(uint64_t seed) {  // (3, 4), non-contiguous
  return leaf({4, 3}, seed).detach().t().requires_grad_();
}

}  // namespace

TEST_CASE("index_select and index_add values", "[ops]") {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK(floats(index_select(a, 1, idx({2, 0, 2}))) == std::vector<float>{3, 1, 3, 6, 4, 6});
  CHECK(floats(index_select(a, 0, idx({1}))) == std::vector<float>{4, 5, 6});
  CHECK(index_select(a, 0, from_vector<int64_t>({1}, {})).shape() == Shape{1, 3});  // 0-d index
  CHECK(index_select(a, -1, idx({})).shape() == Shape{2, 0});
  CHECK(floats(index_select(a.t(), 0, idx({1}))) == std::vector<float>{2, 5});
  CHECK(index_select(arange(4), 0, idx({3, 3})).to_vector<int64_t>() == std::vector<int64_t>{3, 3});
  CHECK(index_select(ones({3}, kBool), 0, idx({0})).dtype() == kBool);

  // Duplicate indices accumulate.
  Tensor y = index_add(zeros({3, 2}), 0, idx({2, 0, 2}), ones({3, 2}));
  CHECK(floats(y) == std::vector<float>{1, 1, 0, 0, 2, 2});
  // A wide row (more than one column block) added many times.
  Tensor wide = index_add(zeros({2, 3000}), 0, idx(std::vector<int64_t>(50, 1)), ones({50, 3000}));
  CHECK(sum(wide).item<float>() == 150000.f);
  CHECK(wide.select(0, 1).select(0, 2999).item<float>() == 50.f);
}

TEST_CASE("index_select and index_add pass gradcheck", "[ops]") {
  auto sel = [](int64_t dim, Tensor index) {
    return [dim, index](const std::vector<Tensor>& in) { return index_select(in[0], dim, index); };
  };
  check_grads(sel(0, idx({0, 0, 0})), {leaf({1, 3}, 1)});  // every index the same
  check_grads(sel(1, idx({3, 1, 3, 0})), {transposed_leaf(2)});
  check_grads(sel(-2, idx({2, 0, 2})), {leaf({2, 2, 3, 2}, 3)});
  check_grads(sel(1, idx({1, 1})), {leaf({0, 3}, 4)});
  check_grads(sel(0, idx({})), {leaf({3, 2}, 5)});
  check_grads(sel(0, from_vector<int64_t>({2}, {})), {leaf({4}, 6)});

  auto add_fn = [](int64_t dim, Tensor index) {
    return
        [dim, index](const std::vector<Tensor>& in) { return index_add(in[0], dim, index, in[1]); };
  };
  check_grads(add_fn(0, idx({1, 1, 0})), {leaf({2, 3}, 7), leaf({3, 3}, 8)});
  check_grads(add_fn(1, idx({3, 0})), {transposed_leaf(9), leaf({3, 2}, 10)});
  check_grads(add_fn(2, idx({0, 0, 1})), {leaf({2, 1, 2, 2}, 11), leaf({2, 1, 3, 2}, 12)});
  check_grads(add_fn(0, idx({1})), {leaf({2, 0}, 13), leaf({1, 0}, 14)});
}

TEST_CASE("gather and scatter_add values", "[ops]") {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK(floats(gather(a, 1, idx({2, 2, 0, 1}, {2, 2}))) == std::vector<float>{3, 3, 4, 5});
  CHECK(floats(gather(a, 0, idx({1, 0, 1}, {1, 3}))) == std::vector<float>{4, 2, 6});
  // index smaller than x off dim: only the leading part is read.
  CHECK(floats(gather(a, 1, idx({1}, {1, 1}))) == std::vector<float>{2});
  CHECK(floats(gather(a.t(), 0, idx({1, 0}, {1, 2}))) == std::vector<float>{2, 4});
  CHECK(gather(scalar_tensor(5), 0, from_vector<int64_t>({0}, {})).item<float>() == 5.f);
  CHECK(gather(a, 1, idx({}, {2, 0})).shape() == Shape{2, 0});

  Tensor y = scatter_add(zeros({2, 3}), 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}), ones({2, 3}));
  CHECK(floats(y) == std::vector<float>{2, 0, 1, 0, 3, 0});
  // src larger than index: only its leading part is used.
  Tensor z = scatter_add(zeros({3}), 0, idx({2, 2}), tensor({1, 10, 100}));
  CHECK(floats(z) == std::vector<float>{0, 0, 11});
  // Many duplicates along a long dim.
  Tensor many = scatter_add(zeros({4}), 0, zeros({100000}, kInt64), ones({100000}));
  CHECK(floats(many) == std::vector<float>{100000, 0, 0, 0});
}

TEST_CASE("gather and scatter_add pass gradcheck", "[ops]") {
  auto g = [](int64_t dim, Tensor index) {
    return [dim, index](const std::vector<Tensor>& in) { return gather(in[0], dim, index); };
  };
  check_grads(g(0, from_vector<int64_t>({0}, {})), {leaf({}, 1)});
  check_grads(g(1, idx({0, 0, 0, 0}, {2, 2})), {leaf({2, 1}, 2)});
  check_grads(g(0, idx({2, 2, 1, 0, 0, 2}, {2, 3})), {transposed_leaf(3)});
  check_grads(g(-1, idx({1, 0, 1, 1, 0, 0, 1, 1}, {2, 1, 2, 2})), {leaf({2, 2, 3, 2}, 4)});
  check_grads(g(1, idx({}, {0, 2})), {leaf({0, 3}, 5)});
  check_grads(g(0, idx({3, 3, 0}, {3, 1})), {leaf({4, 2}, 6)});  // index narrower than x

  auto s = [](int64_t dim, Tensor index) {
    return [dim, index](const std::vector<Tensor>& in) {
      return scatter_add(in[0], dim, index, in[1]);
    };
  };
  check_grads(s(1, idx({1, 1, 0, 1}, {2, 2})), {leaf({2, 3}, 7), leaf({2, 2}, 8)});
  check_grads(s(0, idx({0, 2, 0}, {1, 3})), {transposed_leaf(9), leaf({2, 4}, 10)});  // src > index
  check_grads(s(2, idx({0, 0, 1, 0}, {1, 1, 2, 2})),
              {leaf({2, 2, 2, 2}, 11), leaf({1, 2, 2, 2}, 12)});
  check_grads(s(0, idx({}, {0, 3})), {leaf({0, 3}, 13), leaf({0, 3}, 14)});
}

TEST_CASE("index gradients add up over duplicate indices", "[ops]") {
  Tensor x = ones({3}).requires_grad_();
  sum(index_select(x, 0, idx({0, 2, 2, 2}))).backward();
  CHECK(floats(x.grad()) == std::vector<float>{1, 0, 3});
  Tensor w = ones({2, 2}).requires_grad_();
  sum(gather(w, 1, idx({1, 1, 1, 0, 0, 0}, {2, 3}))).backward();
  CHECK(floats(w.grad()) == std::vector<float>{0, 3, 3, 0});
}

TEST_CASE("one_hot", "[ops]") {
  Tensor y = one_hot(idx({1, 0, 2, 2}, {2, 2}));
  CHECK(y.dtype() == kInt64);
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(y.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1});
  CHECK(one_hot(idx({0}), 4).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0});
  CHECK(one_hot(idx({}), 2).shape() == Shape{0, 2});
  CHECK(one_hot(from_vector<int64_t>({1}, {}), 2).shape() == Shape{2});
  CHECK_THROWS_WITH(one_hot(idx({0, 3}), 3), Contains("one_hot") && Contains("index 3"));
  CHECK_THROWS_AS(one_hot(idx({-1})), IndexError);
  CHECK_THROWS_AS(one_hot(idx({})), ValueError);
  CHECK_THROWS_AS(one_hot(zeros({2})), DTypeError);
}

TEST_CASE("indexing errors name the index, the dim and its size", "[ops]") {
  Tensor a = zeros({2, 3});
  CHECK_THROWS_AS(index_select(a, 1, idx({0, 7})), IndexError);
  CHECK_THROWS_WITH(index_select(a, 1, idx({0, 7})), Contains("index_select") &&
                                                         Contains("index 7") && Contains("dim 1") &&
                                                         Contains("size 3"));
  CHECK_THROWS_WITH(index_select(a, 0, idx({-1})), Contains("index -1"));
  CHECK_THROWS_AS(index_select(a, 2, idx({0})), ShapeError);
  CHECK_THROWS_AS(index_select(a, 0, zeros({1})), DTypeError);
  CHECK_THROWS_AS(index_select(a, 0, idx({0, 0}, {1, 2})), ShapeError);
  CHECK_THROWS_WITH(index_add(a, 0, idx({0}), zeros({2, 3})),
                    Contains("index_add") && Contains("(2, 3)") && Contains("(1, 3)"));
  CHECK_THROWS_AS(index_add(a, 0, idx({0}), zeros({1, 3}, kFloat64)), DTypeError);

  CHECK_THROWS_WITH(gather(a, 1, idx({5}, {1, 1})), Contains("gather") && Contains("index 5") &&
                                                        Contains("dim 1") && Contains("size 3"));
  CHECK_THROWS_WITH(gather(a, 1, idx({0, 0, 0}, {3, 1})),
                    Contains("gather") && Contains("(3, 1)") && Contains("(2, 3)"));
  CHECK_THROWS_AS(gather(a, 1, idx({0})), ShapeError);  // rank mismatch
  CHECK_THROWS_AS(gather(a, 0, zeros({1, 1})), DTypeError);
  CHECK_THROWS_WITH(scatter_add(a, 0, idx({2}, {1, 1}), ones({1, 1})),
                    Contains("scatter_add") && Contains("index 2") && Contains("size 2"));
  CHECK_THROWS_WITH(scatter_add(a, 0, idx({0, 0}, {1, 2}), ones({1, 1})),
                    Contains("scatter_add") && Contains("(1, 2)") && Contains("(1, 1)"));
  CHECK_THROWS_AS(scatter_add(a, 0, idx({0}, {1, 1}), ones({1, 1}, kFloat64)), DTypeError);
}

TEST_CASE("gather and scatter_add on inputs large enough to run in parallel", "[ops]") {
  Generator gen(3);
  const int64_t V = 8, K = 50, C = 3000;
  Tensor x = randn({V, C}, gen, kFloat64), src = randn({K, C}, gen, kFloat64);
  Tensor index = randint(0, V, {K, C}, gen);
  auto xv = x.to_vector<double>(), sv = src.to_vector<double>();
  auto iv = index.to_vector<int64_t>();
  std::vector<double> gathered(static_cast<size_t>(K * C)), scattered = xv;
  for (size_t p = 0; p < iv.size(); ++p) {
    const size_t c = p % static_cast<size_t>(C), target = static_cast<size_t>(iv[p] * C) + c;
    gathered[p] = xv[target];
    scattered[target] += sv[p];
  }
  CHECK(gather(x, 0, index).to_vector<double>() == gathered);
  CHECK_CLOSE(scatter_add(x, 0, index, src), from_vector(scattered, {V, C}), 1e-12, 1e-12);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
