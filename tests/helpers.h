// Test helpers: closeness checks with readable failure messages, and gradcheck wrappers.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>

#include "nabla/nabla.h"

namespace nabla::test {

// Max |a - b| - (atol + rtol |b|) over elements; <= 0 means close. Shapes must match.
inline double close_excess(const Tensor& a, const Tensor& b, double atol, double rtol) {
  REQUIRE(a.shape() == b.shape());
  auto av = a.to(kFloat64).to_vector<double>();
  auto bv = b.to(kFloat64).to_vector<double>();
  double worst = -1;
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::isnan(av[i]) && std::isnan(bv[i])) continue;
    worst = std::max(worst, std::abs(av[i] - bv[i]) - (atol + rtol * std::abs(bv[i])));
  }
  return worst;
}

#define CHECK_CLOSE(a, b, atol, rtol)                                           \
  do {                                                                          \
    INFO("actual:   " << (a).to_string() << "\nexpected: " << (b).to_string()); \
    CHECK(::nabla::test::close_excess((a), (b), (atol), (rtol)) <= 0);          \
  } while (0)

#define CHECK_GRADCHECK(fn, inputs)               \
  do {                                            \
    auto _r = ::nabla::gradcheck((fn), (inputs)); \
    INFO(_r.message);                             \
    CHECK(_r.ok);                                 \
  } while (0)

#define CHECK_GRADGRADCHECK(fn, inputs)               \
  do {                                                \
    auto _r = ::nabla::gradgradcheck((fn), (inputs)); \
    INFO(_r.message);                                 \
    CHECK(_r.ok);                                     \
  } while (0)

// A float64 leaf with random values that requires grad.
inline Tensor leaf(const Shape& shape, uint64_t seed = 0) {
  Generator g(seed + 17);
  return randn(shape, g, kFloat64).requires_grad_();
}
// Positive values (for log, sqrt, pow, div denominators).
inline Tensor positive_leaf(const Shape& shape, uint64_t seed = 0) {
  Generator g(seed + 29);
  return add(rand(shape, g, kFloat64), 0.5).requires_grad_();
}

// Same dtype, shape and bytes (two undefined tensors are equal): for results that must not
// change at all, e.g. a resumed or recomputed run against an uninterrupted one.
inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t elem = dtype_size(ca.dtype());
  return std::memcmp(static_cast<const char*>(ca.storage()->data()) +
                         static_cast<size_t>(ca.offset()) * elem,
                     static_cast<const char*>(cb.storage()->data()) +
                         static_cast<size_t>(cb.offset()) * elem,
                     static_cast<size_t>(ca.numel()) * elem) == 0;
}

}  // namespace nabla::test
