// Sizes at the edge of int64 and of memory (issue 17's probe): each once crashed, overflowed
// signed arithmetic (UBSan) or returned a wrong tensor. Now each throws a nabla::Error naming the
// input, or is computed exactly. tests/core/test_probe_sweep.cpp sweeps the same classes over
// every factory and view.
#include <cstdint>
#include <limits>

#include "nabla/core/allocator.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2p62 = int64_t{1} << 62;
}  // namespace

TEST_CASE("a 0 beside huge dims: strides that do not fit are a ShapeError naming the shape",
          "[core][probe]") {
  CHECK_THROWS_AS(zeros({0, k2p62, k2p62}), ShapeError);
  CHECK_THROWS_WITH(
      zeros({0, k2p62, k2p62}),
      Contains("(0, 4611686018427387904, 4611686018427387904)") && Contains("stride"));
  CHECK_THROWS_WITH(contiguous_strides({0, 3221225511, 3921674336}), Contains("3921674336"));
  // Representable ones still work: the first dim's extent is never multiplied in.
  CHECK(contiguous_strides({kMax}) == Shape{1});
  CHECK(contiguous_strides({k2p62, 0}) == Shape{1, 1});
  CHECK(zeros({3, 0, 1 << 30}).numel() == 0);
  CHECK(shape_numel({k2p62, k2p62, 0}) == 0);
  CHECK_THROWS_WITH(shape_numel({k2p62, 4}), Contains("(4611686018427387904, 4)"));
}

TEST_CASE("allocations beyond memory are an OutOfMemoryError naming the bytes", "[core][probe]") {
  // 2^62 - 1 floats: the size class once wrapped to 0 and indexed a free list at SIZE_MAX.
  CHECK_THROWS_AS(zeros({k2p62 - 1}), OutOfMemoryError);
  CHECK_THROWS_WITH(empty({k2p62 - 1}), Contains("(4611686018427387903,)"));
  CHECK_THROWS_WITH(zeros({k2p62 - 1}, kFloat64),
                    Contains("more than 2^64") && Contains("float64"));
  // 2^40 floats = 4 TiB: once std::bad_alloc.
  CHECK_THROWS_AS(zeros({int64_t{1} << 40}), OutOfMemoryError);
  CHECK_THROWS_WITH(zeros({int64_t{1} << 40}),
                    Contains("4398046511104 bytes") && Contains("(1099511627776,)"));
  CHECK_THROWS_AS(allocator::allocate(SIZE_MAX), OutOfMemoryError);
  CHECK_THROWS_AS(allocator::allocate(allocator::max_request() + 1), OutOfMemoryError);
  // A view of 2^62 elements is fine (stride 0); copying it is not.
  Tensor big = scalar_tensor(1.0).expand({k2p62});
  CHECK(big.numel() == k2p62);
  CHECK_THROWS_AS(big.contiguous(), OutOfMemoryError);
  CHECK_THROWS_AS(scalar_tensor(1.0).expand({k2p62, k2p62}), ShapeError);
  // The allocator still works afterwards.
  CHECK(sum(ones({1000})).item() == 1000.0);
}

TEST_CASE("narrow and slice near INT64_MAX", "[core][probe]") {
  Tensor x = arange(10, kFloat64);
  CHECK_THROWS_AS(x.narrow(0, 2, kMax), IndexError);
  CHECK_THROWS_WITH(x.narrow(0, 2, kMax), Contains("9223372036854775807"));
  CHECK_THROWS_AS(x.narrow(0, kMax, 1), IndexError);
  CHECK_THROWS_AS(x.narrow(0, kMin, 1), IndexError);
  // Slices with huge steps and bounds are exact (clamped like Python's).
  CHECK(x.slice(0, 3, kMax, kMax).to_vector<double>() == std::vector<double>{3});
  CHECK(x.slice(0, 0, kMax, kMax - 1).to_vector<double>() == std::vector<double>{0});
  CHECK(x.slice(0, kMin, kMax, 4).to_vector<double>() == std::vector<double>{0, 4, 8});
  CHECK(x.slice(0, kMax, kMax, 1).numel() == 0);
  CHECK(x.slice(0, kMin, kMin, 1).numel() == 0);
  CHECK_THROWS_WITH(x.slice(0, 0, 5, kMin), Contains("step") && Contains("-9223372036854775808"));
  // Their backward too: the gradient lands on the one element taken.
  Tensor leaf = arange(10, kFloat64).requires_grad_();
  sum(leaf.slice(0, 5, kMax, kMax)).backward();
  std::vector<double> expected(10, 0.0);
  expected[5] = 1.0;
  CHECK(leaf.grad().to_vector<double>() == expected);
}

TEST_CASE("reshape, view, flatten and expand with products past int64", "[core][probe]") {
  Tensor x = zeros({4});
  const int64_t k2p32 = int64_t{1} << 32;
  CHECK_THROWS_AS(x.reshape({-1, k2p32, k2p32}), ShapeError);
  CHECK_THROWS_WITH(x.reshape({-1, k2p32, k2p32}),
                    Contains("reshape") && Contains("(-1, 4294967296, 4294967296)"));
  CHECK_THROWS_AS(x.view({k2p32, k2p32, -1}), ShapeError);
  CHECK_THROWS_AS(x.reshape({k2p32, k2p32, 0}), ShapeError);
  CHECK_THROWS_WITH(x.expand({-3}), Contains("expand") && Contains("-3"));
  Tensor wide = zeros({1}).expand({k2p32, k2p32 / 4});  // 2^62 elements: fits
  CHECK(wide.numel() == k2p62);
  CHECK_THROWS_AS(zeros({1, 1, 1}).expand({k2p32, k2p32, 4}), ShapeError);
  Tensor empty_wide = zeros({1, 1, 0}).expand({k2p62, k2p62, 0});
  CHECK(empty_wide.numel() == 0);
  CHECK_THROWS_WITH(empty_wide.flatten(0, 1),
                    Contains("flatten") && Contains("4611686018427387904"));
  CHECK(empty_wide.unsqueeze(0).shape() == Shape{1, k2p62, k2p62, 0});
}

TEST_CASE("arange, linspace, full and randint at the edges of double and int64", "[core][probe]") {
  CHECK_THROWS_AS(arange(0, 1e300, 1), ValueError);
  CHECK_THROWS_WITH(arange(0, 1e300, 1), Contains("arange") && Contains("1e+300"));
  CHECK_THROWS_WITH(arange(0, 1, std::nan("")), Contains("arange") && Contains("nan"));
  CHECK_THROWS_AS(arange(0, std::numeric_limits<double>::infinity(), 1), ValueError);
  CHECK_THROWS_AS(arange(-1e308, 1e308, 1e-300), ValueError);
  CHECK_THROWS_WITH(arange(-1e300, 1e300, 1e299), Contains("does not fit in int64"));
  CHECK(arange(-0x1p1000, 0x1p1000, 0x1p996, kFloat64).numel() == 32);
  CHECK_THROWS_AS(arange(-0x1p1000, 0x1p1000, 0x1p996), ValueError);  // int64 by default
  CHECK(arange(0, 1, 1e308, kFloat64).to_vector<double>() == std::vector<double>{0});
  CHECK_THROWS_WITH(full({2}, 1e300, kInt64), Contains("full") && Contains("1e+300"));
  CHECK_THROWS_AS(full({2}, std::nan(""), kInt64), ValueError);
  CHECK_THROWS_AS(linspace(0, 1e19, 3, kInt64), ValueError);
  CHECK_THROWS_AS(zeros({2}, kInt64).fill_(-1e20), ValueError);
  CHECK(full({1}, -0x1p63, kInt64).item<int64_t>() == kMin);

  // randint over the whole int64 range is correct, not overflowed.
  Generator g(9);
  auto v = randint(kMin, kMax, {4000}, g).to_vector<int64_t>();
  int64_t lo = kMax, hi = kMin;
  for (int64_t e : v) {
    lo = std::min(lo, e);
    hi = std::max(hi, e);
  }
  CHECK(lo < -(int64_t{1} << 61));
  CHECK(hi > (int64_t{1} << 61));
  CHECK_THROWS_WITH(randint(kMax, kMin, {1}), Contains("9223372036854775807"));
  // Small ranges give the values they always gave.
  Generator a(3), b(3);
  auto small = randint(-5, 5, {100}, a).to_vector<int64_t>();
  for (size_t i = 0; i < small.size(); ++i)
    CHECK(small[i] == -5 + static_cast<int64_t>(b.bits64(i) % 10));
  // A failed random factory does not move the generator.
  Generator c(1);
  CHECK_THROWS_AS(rand({k2p62 - 1}, c), OutOfMemoryError);
  CHECK_THROWS_AS(randint(0, 2, {k2p62, 4}, c), ShapeError);
  CHECK(c.offset() == 0);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
