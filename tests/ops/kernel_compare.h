// Tuned kernels against the reference kernels in the op files (ops/kernels/kernels.h): run a
// function with the tuned kernels switched on and then off, and compare the results bitwise or
// within a stated number of units of T's machine epsilon.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/kernels/kernels.h"
#include "tests/helpers.h"

namespace nabla::test {

// f() with the tuned kernels on (tuned = true) or off (the reference kernels).
template <class F>
auto with_kernels(bool tuned, F&& f) {
  kernels::TunedKernelsGuard guard(tuned);
  return f();
}

// A float tensor of `shape` with N(0, 1) * scale values; non-contiguous unless `contiguous` (the
// dims of a contiguous tensor in reverse order, permuted back).
inline Tensor make_input(const Shape& shape, DType dt, bool contiguous, uint64_t seed,
                         double scale = 1.0) {
  Generator gen(seed);
  if (contiguous) return mul(randn(shape, gen, dt), scale);
  Shape reversed(shape.rbegin(), shape.rend());
  std::vector<int64_t> perm;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
  return mul(randn(reversed, gen, dt), scale).permute(perm);
}

template <class T>
bool same_bits_as(const Tensor& a, const Tensor& b) {
  const std::vector<T> av = a.contiguous().to_vector<T>(), bv = b.contiguous().to_vector<T>();
  return av.size() == bv.size() &&
         (av.empty() || std::memcmp(av.data(), bv.data(), av.size() * sizeof(T)) == 0);
}

// Same shape, same dtype, the same bits in every element.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return a.dtype() == kFloat32 ? same_bits_as<float>(a, b) : same_bits_as<double>(a, b);
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to(kFloat64).to_vector<double>())
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  return m;
}

// The largest |a - b| / (eps * max(|b|, floor)) over the elements, eps being the machine epsilon
// of the dtype: how many units of eps apart a is from the reference b, relative to b (or to
// `floor`, for results that can cancel to near 0). Infinite where only one of the two is NaN or
// they are different infinities.
inline double eps_apart(const Tensor& a, const Tensor& b, double floor) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  const double eps = a.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon()
                                           : std::numeric_limits<double>::epsilon();
  const auto av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    if (av[i] == bv[i] || (std::isnan(av[i]) && std::isnan(bv[i]))) continue;
    if (!std::isfinite(av[i]) || !std::isfinite(bv[i]))
      return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(av[i] - bv[i]) / (eps * std::max(std::abs(bv[i]), floor)));
  }
  return worst;
}

}  // namespace nabla::test

#define CHECK_SAME_BITS(tuned, reference)                                       \
  do {                                                                          \
    INFO("eps apart: " << ::nabla::test::eps_apart((tuned), (reference), 0.0)); \
    CHECK(::nabla::test::same_bits((tuned), (reference)));                      \
  } while (0)

// Within `bound` units of eps of the reference, relative to max(|reference|, floor).
#define CHECK_EPS_APART(tuned, reference, bound, floor)                            \
  do {                                                                             \
    const double _apart = ::nabla::test::eps_apart((tuned), (reference), (floor)); \
    INFO("eps apart: " << _apart << " (bound " << (bound) << ")");                 \
    CHECK(_apart <= (bound));                                                      \
  } while (0)
