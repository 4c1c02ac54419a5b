// GELU's value and derivative per element, shared by the gelu kernels (ops/activation.cpp) and
// the fused linear + activation (ops/linear.cpp), so both compute exactly the same numbers.
#pragma once
#include <cmath>
#include <numbers>
#include <type_traits>

#include "ops/activation.h"
#include "ops/vec_math.h"

namespace nabla::gelu_math {

constexpr double kSqrt1_2 = 0.5 * std::numbers::sqrt2;  // 1/sqrt(2)
constexpr double kInvSqrt2Pi =
    0.5 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi;                        // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;  // the cubic coefficient of the tanh approximation

// NOTE: the kernels evaluate in T, like PyTorch's CPU kernels, so float32 matches PyTorch's
// rounding closely. float32 uses vec_math's erf/exp so the loops vectorise.
// always_inline: called per element inside the kernels' loops, which vectorise only if inlined.
template <GeluApproximate A, class T>
[[gnu::always_inline]] inline T gelu_value(T x) {
  if constexpr (A == GeluApproximate::None) {
    return x * T(0.5) * (T(1) + vec_math::erf_t(x * T(kSqrt1_2)));
  } else {
    const T inner = T(kSqrt2OverPi) * (x + T(kKappa) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
}

// d gelu / dx
template <GeluApproximate A, class T>
[[gnu::always_inline]] inline T gelu_derivative(T x) {
  if constexpr (A == GeluApproximate::None && std::is_same_v<T, float>) {
    float gauss;  // exp(-z^2) = exp(-x^2 / 2) with z = x / sqrt(2): erf's own exp, reused
    const float cdf = 0.5f * (1.0f + vec_math::erf_and_gauss(x * float(kSqrt1_2), gauss));
    return cdf + x * float(kInvSqrt2Pi) * gauss;
  } else if constexpr (A == GeluApproximate::None) {
    const T cdf = T(0.5) * (T(1) + vec_math::erf_t(x * T(kSqrt1_2)));
    const T pdf = T(kInvSqrt2Pi) * vec_math::exp_t(T(-0.5) * x * x);
    return cdf + x * pdf;
  } else {
    const T inner = T(kSqrt2OverPi) * (x + T(kKappa) * x * x * x);
    const T t = std::tanh(inner);
    const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kKappa) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * d_inner;
  }
}

}  // namespace nabla::gelu_math
