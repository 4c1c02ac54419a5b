// topk, sort, argsort: values and indices on hand-checked rows (stable ties, NaN largest),
// gradcheck and gradgradcheck on the standard shapes, int64, and errors.
#include <limits>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_fn(const Fn& fn, const Tensor& x) {
  CHECK_GRADCHECK(fn, std::vector<Tensor>{x});
  CHECK_GRADGRADCHECK(fn, std::vector<Tensor>{x});
}

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// The same values as `expected`, NaN matching NaN.
void check_values(const Tensor& t, const std::vector<double>& expected) {
  const std::vector<double> got = t.to(kFloat64).to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << expected[i]);
    CHECK((std::isnan(expected[i]) ? std::isnan(got[i]) : got[i] == expected[i]));
  }
}

}  // namespace

// The row of gen_sort.py's exploration, with torch 1.13's results (stable=True).
TEST_CASE("sort: stable order, NaN largest, both directions, as torch.sort(stable=True)",
          "[ops][sort]") {
  for (DType dt : {kFloat64, kFloat32}) {
    INFO(dtype_name(dt));
    Tensor x = from_vector(std::vector<double>{1, 3, 3, kNaN, 2, 3, kNaN}, {7}).to(dt);
    ValuesIndices up = sort(x);
    check_values(up.values, {1, 2, 3, 3, 3, kNaN, kNaN});
    CHECK(ints(up.indices) == std::vector<int64_t>{0, 4, 1, 2, 5, 3, 6});
    ValuesIndices down = sort(x, 0, /*descending=*/true);
    check_values(down.values, {kNaN, kNaN, 3, 3, 3, 2, 1});
    CHECK(ints(down.indices) == std::vector<int64_t>{3, 6, 1, 2, 5, 4, 0});
    CHECK(ints(argsort(x)) == ints(up.indices));
    CHECK(ints(argsort(x, -1, true)) == ints(down.indices));
    // -inf and +inf order as numbers; -0.0 and 0.0 are equal (input order kept).
    Tensor y = from_vector(std::vector<double>{kInf, -0.0, -kInf, 0.0, kNaN}, {5}).to(dt);
    CHECK(ints(argsort(y)) == std::vector<int64_t>{2, 1, 3, 0, 4});
  }
}

TEST_CASE("topk: the first k of the stable sort; shapes along any dim", "[ops][sort]") {
  Tensor x = from_vector(std::vector<double>{1, 3, 3, kNaN, 2, 3, kNaN}, {7});
  ValuesIndices big = topk(x, 4);
  check_values(big.values, {kNaN, kNaN, 3, 3});
  // torch.topk returns [3, 6, 2, 5] here: which ties it picks is unspecified there; here the
  // earliest ties come first.
  CHECK(ints(big.indices) == std::vector<int64_t>{3, 6, 1, 2});
  ValuesIndices small = topk(x, 4, 0, /*largest=*/false);
  check_values(small.values, {1, 2, 3, 3});
  CHECK(ints(small.indices) == std::vector<int64_t>{0, 4, 1, 2});
  CHECK(ints(topk(x, 4, 0, true, /*sorted=*/false).indices) == ints(big.indices));

  Tensor m = tensor({{5, 1, 4}, {2, 8, 0}}, kFloat64);
  ValuesIndices d0 = topk(m, 1, 0);
  CHECK(d0.values.shape() == Shape{1, 3});
  check_values(d0.values, {5, 8, 4});
  CHECK(ints(d0.indices) == std::vector<int64_t>{0, 1, 0});
  ValuesIndices d1 = topk(m, 2, -1);
  CHECK(d1.values.shape() == Shape{2, 2});
  check_values(d1.values, {5, 4, 8, 2});
  CHECK(topk(m, 0, 1).values.shape() == Shape{2, 0});
  // 0-d: one element, k in {0, 1}.
  Tensor s = scalar_tensor(2.5, kFloat64);
  CHECK(topk(s, 1).values.item<double>() == 2.5);
  CHECK(topk(s, 1).indices.item<int64_t>() == 0);
  CHECK(sort(s).values.dim() == 0);
}

TEST_CASE("sort, argsort and topk take int64", "[ops][sort]") {
  Tensor x = from_vector(std::vector<int64_t>{4, -1, 4, 7, 0}, {5});
  ValuesIndices s = sort(x, 0, true);
  CHECK(s.values.dtype() == kInt64);
  CHECK(ints(s.values) == std::vector<int64_t>{7, 4, 4, 0, -1});
  CHECK(ints(s.indices) == std::vector<int64_t>{3, 0, 2, 4, 1});
  CHECK(ints(argsort(x)) == std::vector<int64_t>{1, 4, 0, 2, 3});
  CHECK(ints(topk(x, 2).values) == std::vector<int64_t>{7, 4});
}

TEST_CASE("sort and topk pass gradcheck and gradgradcheck", "[ops][sort]") {
  struct Case {
    Tensor x;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {leaf({}, 1), 0},
      {leaf({1}, 2), 0},
      {leaf({1, 4}, 3), 0},
      {leaf({3, 5}, 4), -1},
      {leaf({2, 4, 3}, 5), 1},
      {leaf({4, 3}, 6).detach().t().requires_grad_(), 1},                // transposed
      {leaf({3, 8}, 7).detach().slice(1, 0, 8, 2).requires_grad_(), 1},  // strided
      {leaf({0, 3}, 8), 1},                                              // size-0 rows
      {leaf({3, 0}, 9), 1},                                              // size-0 dim
      {leaf({2, 1, 5}, 10), 0},
  };
  for (const auto& [x, dim] : cases) {
    INFO("shape " << shape_str(x.shape()) << " dim " << dim);
    const int64_t d = dim;
    const int64_t n = x.dim() == 0 ? 1 : x.size(d);
    for (bool flag : {false, true}) {
      check_fn([d, flag](auto& in) { return sort(in[0], d, flag).values; }, x);
      for (int64_t k : {int64_t{0}, n / 2, n})
        check_fn([d, k, flag](auto& in) { return topk(in[0], k, d, flag).values; }, x);
    }
  }
}

TEST_CASE("topk's gradient goes to the chosen positions only", "[ops][sort]") {
  Tensor x = tensor({{0.5, -1, 2, 0.25}}, kFloat64).requires_grad_();
  ValuesIndices r = topk(x, 2);
  Tensor g = autograd::grad({r.values}, {x}, {tensor({{10, 20}}, kFloat64)})[0];
  CHECK(g.to_vector<double>() == std::vector<double>{20, 0, 10, 0});
  CHECK_FALSE(r.indices.requires_grad());
  CHECK_FALSE(argsort(x).requires_grad());
}

TEST_CASE("rows above the parallel grain sort like one row at a time", "[ops][sort]") {
  Tensor x = leaf({300, 257}, 11).detach();
  ValuesIndices all = sort(x, 1, true);
  for (int64_t r : {int64_t{0}, int64_t{151}, int64_t{299}}) {
    ValuesIndices one = sort(x.select(0, r), 0, true);
    CHECK(ints(all.indices.select(0, r).contiguous()) == ints(one.indices));
  }
  const std::vector<double> v = all.values.to_vector<double>();
  int64_t out_of_order = 0;
  for (size_t r = 0; r < 300; ++r)
    for (size_t j = 1; j < 257; ++j) out_of_order += v[r * 257 + j] > v[r * 257 + j - 1];
  CHECK(out_of_order == 0);
}

TEST_CASE("topk, sort and argsort errors name the op and the problem", "[ops][sort]") {
  Tensor x = ones({2, 3}, kFloat64);
  CHECK_THROWS_MATCHES(
      topk(x, 4), ValueError, Catch::Matchers::Predicate<ValueError>([](const ValueError& e) {
        const std::string m = e.what();
        return m.find("topk") != std::string::npos && m.find("k = 4") != std::string::npos &&
               m.find("(2, 3)") != std::string::npos;
      }));
  CHECK_THROWS_AS(topk(x, -1), ValueError);
  CHECK_THROWS_WITH(topk(x, 1, 2), Contains("topk"));
  CHECK_THROWS_AS(topk(x, 1, 2), ShapeError);
  CHECK_THROWS_AS(sort(x, -3), ShapeError);
  CHECK_THROWS_WITH(sort(x, -3), Contains("sort"));
  CHECK_THROWS_AS(argsort(x, 5), ShapeError);
  Tensor b = zeros({3}, kBool);
  CHECK_THROWS_AS(topk(b, 1), DTypeError);
  CHECK_THROWS_WITH(topk(b, 1), Contains("topk") && Contains("bool"));
  CHECK_THROWS_WITH(sort(b), Contains("sort") && Contains("bool"));
  CHECK_THROWS_WITH(argsort(b), Contains("argsort") && Contains("bool"));
  CHECK_THROWS_AS(topk(scalar_tensor(1.0), 2), ValueError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
