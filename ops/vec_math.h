// exp, tanh and erf for float32 written as plain arithmetic and always inlined, so that the
// compiler vectorises the loops that call them (libm's expf/erff are opaque calls, one element at a
// time). Their clamps and selects vectorise on AVX2 only because the build says floating point
// never traps (-fno-trapping-math, CMakeLists.txt). float64 keeps libm: gradcheck runs in float64
// and wants the last digit.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace nabla::vec_math {

// exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact product), e^r by its
// degree-6 Taylor polynomial (truncation < 1.3e-7 relative), 2^n through the exponent bits.
// Relative error about 2 ulp on [-87, 88]. Below -87 it returns 0 (no denormals: exp(-inf) is
// exactly 0, as a masked softmax needs); above 88 it returns exp(88); NaN stays NaN.
[[gnu::always_inline]] inline float exp(float x) {
  const bool below = x < -87.0f;
  x = below ? -87.0f : x;  // selects, not std::min/max: they keep the loop vectorisable
  x = x > 88.0f ? 88.0f : x;
  // Round to nearest by adding 1.5 * 2^23 (no std::floor: GCC does not vectorise it unless
  // -fno-trapping-math); the integer n then sits in the low mantissa bits of `shifted`.
  constexpr float kShifter = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShifter);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float result = p * std::bit_cast<float>((ni + 127) << 23);
  return below ? 0.0f : result;
}

// exp(x) over float32's whole range, for the public exp op: +inf once e^x rounds above FLT_MAX
// (x > 88.7228...), gradual underflow into the denormals down to x ~ -103.97, then +0; NaN stays
// NaN, exp(-inf) = 0, exp(inf) = inf. x = n ln2 + r as above; e^r = 1 + r + r^2 P(r) with the
// degree-5 minimax P of Cephes's expf (S. L. Moshier, Cephes Math Library 2.2, expf.c); 2^n as
// two halves 2^(n/2) 2^(n - n/2), each a normal float, so that only the last product rounds,
// into a denormal where e^x is one. Measured against double exp rounded to float on every float
// in [-104, 89]: at most 1 ulp apart (0.8% of them are 1 ulp off), with and without FMA.
[[gnu::always_inline]] inline float exp_full_range(float x) {
  x = x < -104.0f ? -104.0f : x;  // e^-104 rounds to +0 (so does -inf); NaN fails both tests
  x = x > 89.0f ? 89.0f : x;      // e^89 rounds to +inf
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = x * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShifter);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = (p * (r * r) + r) + 1.0f;
  const int32_t half = ni >> 1;  // n in [-150, 128]: both halves in [-75, 64]
  const auto two_to = [](int32_t k) { return std::bit_cast<float>(uint32_t(k + 127) << 23); };
  return e * two_to(half) * two_to(ni - half);
}

// erf(x) by Abramowitz and Stegun 7.1.26 (formula error < 1.5e-7; with float32 rounding the
// measured absolute error is < 5e-7), the same formula PyTorch's vectorised CPU kernels use.
// The formula needs exp(-x^2); it is handed back in `gauss` for callers that need it too
// (GELU's derivative: one exp instead of two).
[[gnu::always_inline]] inline float erf_and_gauss(float x, float& gauss) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  gauss = vec_math::exp(-ax * ax);
  const float y = 1.0f - p * t * gauss;
  return std::copysign(y, x);
}
[[gnu::always_inline]] inline float erf(float x) {
  float gauss;
  return erf_and_gauss(x, gauss);
}

// tanh(x): below |x| = 0.5 its Taylor series to x^17 (the next term is under 1e-8 relative
// there), above it 1 - 2 / (exp(2|x|) + 1), which has no cancellation once tanh >= 0.46; then
// x's sign. Both are computed and one selected, so a loop over it vectorises. Measured
// against float64 on 2^24 points of [-12, 12]: at most 3.5 ulp. NaN stays NaN.
[[gnu::always_inline]] inline float tanh(float x) {
  const float a = std::fabs(x);
  const float x2 = x * x;
  float p = 6404582.0f / 10854718875.0f;
  p = p * x2 - 929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = a + a * x2 * p;
  const float large = 1.0f - 2.0f / (vec_math::exp(2.0f * a) + 1.0f);
  return std::copysign(a < 0.5f ? small : large, x);  // tanh(-0) = -0
}

// In T's own precision: the versions above for float32, libm's for float64.
template <class T>
[[gnu::always_inline]] inline T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return vec_math::exp(x);
  } else {
    return std::exp(x);
  }
}
template <class T>
[[gnu::always_inline]] inline T exp_full_range_t(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return vec_math::exp_full_range(x);
  } else {
    return std::exp(x);
  }
}
template <class T>
[[gnu::always_inline]] inline T tanh_t(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return vec_math::tanh(x);
  } else {
    return std::tanh(x);
  }
}
template <class T>
[[gnu::always_inline]] inline T erf_t(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return vec_math::erf(x);
  } else {
    return std::erf(x);
  }
}

}  // namespace nabla::vec_math
