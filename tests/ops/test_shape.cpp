// Shape ops (cat stack split chunk repeat repeat_interleave pad tril triu): values against
// hand-computed results, gradcheck + gradgradcheck on the standard shapes, and error messages.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void check_grads(const Fn& fn, const std::vector<Tensor>& inputs, bool second_order = true) {
  CHECK_GRADCHECK(fn, inputs);
  if (second_order) CHECK_GRADGRADCHECK(fn, inputs);
}

Tensor transposed_leaf(uint64_t seed) {  // (3, 4), non-contiguous
  Tensor t = leaf({4, 3}, seed).detach().t().requires_grad_();
  REQUIRE(!t.is_contiguous());
  return t;
}

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }
std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

}  // namespace

TEST_CASE("cat and stack values", "[ops]") {
  Tensor a = tensor({{1, 2}, {3, 4}}), b = tensor({{5, 6}});
  CHECK(cat({a, b}).shape() == Shape{3, 2});
  CHECK(floats(cat({a, b})) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(floats(cat({a, a.t()}, -1)) == std::vector<float>{1, 2, 1, 3, 3, 4, 2, 4});
  CHECK(floats(cat({zeros({0}), b, zeros({0, 2})})) == std::vector<float>{5, 6});  // skipped
  CHECK(cat({zeros({0}), zeros({0})}).shape() == Shape{0});
  CHECK(ints(cat({arange(3), arange(2)})) == std::vector<int64_t>{0, 1, 2, 0, 1});
  // cat copies: the result does not alias its inputs.
  Tensor c = cat({a});
  c.fill_(0);
  CHECK(floats(a) == std::vector<float>{1, 2, 3, 4});

  CHECK(stack({a, a}).shape() == Shape{2, 2, 2});
  CHECK(floats(stack({a, a * 10.0}, 2)) == std::vector<float>{1, 10, 2, 20, 3, 30, 4, 40});
  CHECK(floats(stack({scalar_tensor(1), scalar_tensor(2)})) == std::vector<float>{1, 2});
  CHECK(stack({a, a}, -1).shape() == Shape{2, 2, 2});
}

TEST_CASE("cat and stack pass gradcheck", "[ops]") {
  SECTION("cat") {
    check_grads(
        [](auto& in) {
          return cat({in[0], in[1]}, 0);
        },
        {leaf({2, 3}, 1), leaf({1, 3}, 2)});
    check_grads(
        [](auto& in) {
          return cat({in[0], in[1], in[0]}, 1);
        },
        {transposed_leaf(3), leaf({3, 2}, 4)});  // reused input: gradients add
    check_grads(
        [](auto& in) {
          return cat({in[0], in[1]}, -2);
        },
        {leaf({2, 2, 3, 2}, 5), leaf({2, 2, 1, 2}, 6)});
    check_grads(
        [](auto& in) {
          return cat({in[0], in[1]}, 0);
        },
        {leaf({0, 3}, 7), leaf({2, 3}, 8)});
    check_grads([](auto& in) { return cat({in[0], in[1]}); }, {leaf({0}, 9), leaf({2, 3}, 10)});
    check_grads([](auto& in) { return cat({in[0], in[1]}); }, {leaf({1}, 11), leaf({4}, 12)});
  }
  SECTION("stack") {
    check_grads([](auto& in) { return stack({in[0], in[1]}); }, {leaf({}, 1), leaf({}, 2)});
    check_grads(
        [](auto& in) {
          return stack({in[0], in[1]}, 1);
        },
        {transposed_leaf(3), leaf({3, 4}, 4)});
    check_grads(
        [](auto& in) {
          return stack({in[0], in[0], in[1]}, -1);
        },
        {leaf({2, 1, 3}, 5), leaf({2, 1, 3}, 6)});
    check_grads([](auto& in) { return stack({in[0]}); }, {leaf({0, 2}, 7)});
  }
}

TEST_CASE("split and chunk follow PyTorch", "[ops]") {
  Tensor x = arange(0.0, 10.0, 1.0, kFloat32).view({2, 5});
  auto parts = split(x, 2, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].shape() == Shape{2, 1});
  CHECK(floats(parts[1]) == std::vector<float>{2, 3, 7, 8});
  auto sized = split(x, std::vector<int64_t>{1, 0, 4}, -1);
  REQUIRE(sized.size() == 3);
  CHECK(sized[1].shape() == Shape{2, 0});
  CHECK(floats(sized[2]) == std::vector<float>{1, 2, 3, 4, 6, 7, 8, 9});
  CHECK(split(zeros({0}), 2).size() == 1);

  auto sizes = [](const std::vector<Tensor>& ts) {
    std::vector<int64_t> s;
    for (auto& t : ts) s.push_back(t.size(0));
    return s;
  };
  CHECK(sizes(chunk(zeros({5}), 3)) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes(chunk(zeros({6}), 4)) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes(chunk(zeros({0}), 3)) == std::vector<int64_t>{0, 0, 0});
  CHECK(sizes(chunk(zeros({2}), 5)) == std::vector<int64_t>{1, 1});
}

TEST_CASE("split and chunk pass gradcheck", "[ops]") {
  // Pieces used out of order and one piece unused (its gradient is zero).
  check_grads(
      [](auto& in) {
        auto p = split(in[0], 2, 1);
        return cat({mul(p[1], p[1]), p[0]}, 1);
      },
      {leaf({3, 5}, 1)});
  check_grads(
      [](auto& in) {
        auto p = split(in[0], std::vector<int64_t>{1, 2}, 0);
        return mul(p[1], p[0]);
      },
      {transposed_leaf(2)});
  check_grads(
      [](auto& in) {
        auto p = chunk(in[0], 2, -1);
        return sub(p[0], p[1]);
      },
      {leaf({2, 1, 3, 4}, 3)});
  check_grads([](auto& in) { return chunk(in[0], 3, 0)[0]; }, {leaf({0, 2}, 4)});
}

TEST_CASE("repeat and repeat_interleave values", "[ops]") {
  Tensor a = tensor({{1, 2}, {3, 4}});
  CHECK(repeat(a, {1, 2}).shape() == Shape{2, 4});
  CHECK(floats(repeat(a, {2, 1})) == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4});
  CHECK(floats(repeat(a, {1, 2})) == std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(repeat(a, {3, 1, 2}).shape() == Shape{3, 2, 4});
  CHECK(repeat(a, {0, 2}).shape() == Shape{0, 4});
  CHECK(repeat(scalar_tensor(7), {}).shape() == Shape{});
  Tensor same = repeat(a, {1, 1});
  same.fill_(0);  // a fresh copy, even for all-ones repeats
  CHECK(floats(a) == std::vector<float>{1, 2, 3, 4});

  CHECK(floats(repeat_interleave(a, 2)) == std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4});
  CHECK(floats(repeat_interleave(a, 2, 0)) == std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(floats(repeat_interleave(a, 2, 1)) == std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4});
  // d2l: valid_lens (B,) repeated per attention head.
  Tensor valid_lens = from_vector<int64_t>({3, 2}, {2});
  CHECK(ints(repeat_interleave(valid_lens, 3, 0)) == std::vector<int64_t>{3, 3, 3, 2, 2, 2});
  Tensor reps = from_vector<int64_t>({0, 3}, {2});
  CHECK(floats(repeat_interleave(a, reps, 0)) == std::vector<float>{3, 4, 3, 4, 3, 4});
  CHECK(ints(repeat_interleave(arange(3), from_vector<int64_t>({2}, {1}))) ==
        std::vector<int64_t>{0, 0, 1, 1, 2, 2});
  CHECK(repeat_interleave(zeros({0, 2}), 2, 0).shape() == Shape{0, 2});
}

TEST_CASE("repeat and repeat_interleave pass gradcheck", "[ops]") {
  auto rep = [](std::vector<int64_t> r) {
    return [r](const std::vector<Tensor>& in) { return repeat(in[0], r); };
  };
  check_grads(rep({2, 3}), {leaf({}, 1)});
  check_grads(rep({2, 1, 3}), {leaf({1, 3}, 2)});
  check_grads(rep({2, 2}), {transposed_leaf(3)});
  check_grads(rep({1, 2, 1, 2}), {leaf({2, 1, 3, 2}, 4)});
  check_grads(rep({2, 3}), {leaf({0, 3}, 5)});
  check_grads(rep({0, 3}), {leaf({2, 3}, 6)});

  auto ri = [](int64_t r, std::optional<int64_t> d) {
    return [r, d](const std::vector<Tensor>& in) { return repeat_interleave(in[0], r, d); };
  };
  check_grads(ri(3, std::nullopt), {leaf({}, 7)});
  check_grads(ri(2, 1), {transposed_leaf(8)});
  check_grads(ri(3, -2), {leaf({2, 1, 3, 2}, 9)});
  check_grads(ri(2, 0), {leaf({0, 3}, 10)});

  Tensor reps = from_vector<int64_t>({2, 0, 3}, {3});
  check_grads([reps](auto& in) { return repeat_interleave(in[0], reps, 0); },
              {transposed_leaf(11)});
  check_grads([reps](auto& in) { return repeat_interleave(in[0], reps, 1); },
              {leaf({2, 3, 2}, 12)});
  check_grads([](auto& in) { return repeat_interleave(in[0], from_vector<int64_t>({2}, {}), 0); },
              {leaf({}, 13)});
}

TEST_CASE("pad follows F.pad", "[ops]") {
  Tensor x = arange(0.0, 5.0, 1.0, kFloat32);
  CHECK(floats(pad(x, {2, -1}, 9)) == std::vector<float>{9, 9, 0, 1, 2, 3});
  CHECK(floats(pad(x, {-3, -2})).empty());
  CHECK(floats(pad(x, {-4, 0})) == std::vector<float>{4});
  CHECK(floats(pad(x, {5, -4})) == std::vector<float>{0, 0, 0, 0, 0, 0});
  Tensor a = tensor({{1, 2}, {3, 4}});
  // Last dim first: (left, right) of dim 1, then (top, bottom) of dim 0.
  CHECK(floats(pad(a, {1, 0, 0, 1})) == std::vector<float>{0, 1, 2, 0, 3, 4, 0, 0, 0});
  CHECK(pad(a, {}).shape() == Shape{2, 2});
  CHECK(ints(pad(arange(2), {1, 1}, 7)) == std::vector<int64_t>{7, 0, 1, 7});
}

TEST_CASE("pad passes gradcheck", "[ops]") {
  auto p = [](std::vector<int64_t> pads) {
    return [pads](const std::vector<Tensor>& in) { return pad(in[0], pads, 3.0); };
  };
  check_grads(p({}), {leaf({}, 1)});
  check_grads(p({1, 2}), {leaf({1, 3}, 2)});
  check_grads(p({0, 1, 2, -1}), {transposed_leaf(3)});
  check_grads(p({1, 1, -1, 0, 2, 0}), {leaf({2, 2, 3, 2}, 4)});
  check_grads(p({1, 1, 1, 1}), {leaf({0, 3}, 5)});
  check_grads(p({-3, 2}), {leaf({2, 3}, 6)});
}

TEST_CASE("tril and triu", "[ops]") {
  Tensor a = add(arange(0.0, 6.0, 1.0, kFloat32).view({2, 3}), 1.0);  // [[1,2,3],[4,5,6]]
  CHECK(floats(tril(a)) == std::vector<float>{1, 0, 0, 4, 5, 0});
  CHECK(floats(triu(a)) == std::vector<float>{1, 2, 3, 0, 5, 6});
  CHECK(floats(tril(a, 1)) == std::vector<float>{1, 2, 0, 4, 5, 6});
  CHECK(floats(triu(a, -1)) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(floats(tril(a, -2)) == std::vector<float>{0, 0, 0, 0, 0, 0});
  CHECK(floats(triu(a, 100)) == std::vector<float>{0, 0, 0, 0, 0, 0});
  CHECK(floats(tril(a, INT64_MAX)) == floats(a));
  CHECK(floats(triu(a, INT64_MIN)) == floats(a));
  // A causal mask in bool.
  Tensor mask = tril(ones({3, 3}, kBool));
  CHECK(mask.dtype() == kBool);
  CHECK(mask.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK(floats(triu(a.t())) == std::vector<float>{1, 4, 0, 5, 0, 0});  // non-contiguous input
  CHECK(tril(zeros({2, 0, 3})).shape() == Shape{2, 0, 3});

  for (int64_t k : {-1, 0, 2}) {
    INFO("diagonal " << k);
    auto lo = [k](const std::vector<Tensor>& in) { return tril(in[0], k); };
    auto up = [k](const std::vector<Tensor>& in) { return triu(in[0], k); };
    for (const Tensor& x : {leaf({1, 3}, 1), transposed_leaf(2), leaf({2, 2, 3, 2}, 3),
                            leaf({0, 3}, 4), leaf({3, 3}, 5), leaf({2, 3, 1}, 6)}) {
      check_grads(lo, {x});
      check_grads(up, {x});
    }
  }
}

TEST_CASE("shape op errors name the op and the shapes", "[ops]") {
  Tensor a = zeros({2, 3}), b = zeros({2, 4});
  CHECK_THROWS_AS(cat({a, b}), ShapeError);
  CHECK_THROWS_WITH(cat({a, b}), Contains("cat") && Contains("(2, 3)") && Contains("(2, 4)"));
  CHECK_NOTHROW(cat({a, b}, 1));
  CHECK_THROWS_AS(cat({}), ValueError);
  CHECK_THROWS_AS(cat({a, zeros({2, 3}, kFloat64)}), DTypeError);
  CHECK_THROWS_WITH(cat({a, zeros({2})}, 0), Contains("cat") && Contains("(2,)"));
  CHECK_THROWS_WITH(cat({scalar_tensor(1)}), Contains("cat") && Contains("0-d"));
  CHECK_THROWS_WITH(cat({a, a}, 2), Contains("cat") && Contains("dim 2"));
  CHECK_THROWS_WITH(stack({a, b}), Contains("stack") && Contains("(2, 3)") && Contains("(2, 4)"));
  CHECK_THROWS_AS(stack({a, a}, 3), ShapeError);

  CHECK_THROWS_AS(split(a, 0, 1), ValueError);
  CHECK_THROWS_WITH(split(a, std::vector<int64_t>{1, 1}, 1),
                    Contains("split") && Contains("(1, 1)") && Contains("(2, 3)"));
  CHECK_THROWS_AS(split(a, std::vector<int64_t>{4, -1}, 1), ValueError);
  CHECK_THROWS_AS(chunk(a, 0), ValueError);
  CHECK_THROWS_AS(split(scalar_tensor(1), 1), ShapeError);

  CHECK_THROWS_WITH(repeat(a, {2}), Contains("repeat") && Contains("(2, 3)"));
  CHECK_THROWS_AS(repeat(a, {2, -1}), ValueError);
  CHECK_THROWS_AS(repeat_interleave(a, -1, 0), ValueError);
  CHECK_THROWS_AS(repeat_interleave(a, 2, 2), ShapeError);
  CHECK_THROWS_AS(repeat_interleave(a, from_vector<int64_t>({1, 1}, {2}), 1), ShapeError);
  CHECK_THROWS_WITH(repeat_interleave(a, from_vector<int64_t>({1, 1}, {2}), 1),
                    Contains("repeat_interleave") && Contains("(2, 3)") && Contains("(2,)"));
  CHECK_THROWS_AS(repeat_interleave(a, zeros({3}), 1), DTypeError);
  CHECK_THROWS_WITH(repeat_interleave(a, from_vector<int64_t>({1, -2, 1}, {3}), 1),
                    Contains("repeats[1] = -2"));

  CHECK_THROWS_WITH(pad(a, {1}), Contains("pad") && Contains("(2, 3)"));
  CHECK_THROWS_AS(pad(a, {1, 1, 1, 1, 1, 1}), ShapeError);
  CHECK_THROWS_WITH(pad(a, {-2, -2}), Contains("pad") && Contains("(2, 3)") && Contains("-1"));

  CHECK_THROWS_AS(tril(zeros({3})), ShapeError);
  CHECK_THROWS_WITH(triu(zeros({3})), Contains("triu") && Contains("(3,)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
