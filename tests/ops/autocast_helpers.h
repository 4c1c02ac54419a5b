// What the autocast tests (test_autocast*.cpp) share: bfloat16's unit roundoff, seeded float32
// inputs and a norm-wise relative difference.
#pragma once
#include <cmath>
#include <vector>

#include "tests/helpers.h"

namespace nabla::test {

// bfloat16 keeps 8 significant bits: rounding to it has relative error at most u = 2^-8.
inline constexpr double kU = 0x1p-8;

inline Tensor randn_f32(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, g);
}

// ||a - b|| / ||b|| over all elements (||a - b|| when b is all zeros, 0 when both are empty).
inline double norm_ratio(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto av = a.to(kFloat64).contiguous().to_vector<double>();
  const auto bv = b.to(kFloat64).contiguous().to_vector<double>();
  double diff = 0, ref = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    diff += (av[i] - bv[i]) * (av[i] - bv[i]);
    ref += bv[i] * bv[i];
  }
  return ref == 0 ? std::sqrt(diff) : std::sqrt(diff / ref);
}

}  // namespace nabla::test
