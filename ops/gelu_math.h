// GELU's constants and its value and derivative per element as the textbook writes them (std::erf,
// std::exp, std::tanh, evaluated in T): the reference kernels of gelu (ops/activation.cpp) and of
// linear_activation (ops/linear.cpp). The vectorised versions are in ops/kernels/gelu.h.
#pragma once
#include <cmath>
#include <numbers>

#include "nabla/ops/activation.h"

namespace nabla::gelu_math {

constexpr double kSqrt1_2 = 0.5 * std::numbers::sqrt2;  // 1/sqrt(2)
constexpr double kInvSqrt2Pi =
    0.5 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi;                        // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;  // the cubic coefficient of the tanh approximation

// exact: x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)));  tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + k x^3)))
template <class T>
T gelu_value(T x, GeluApproximate a) {
  if (a == GeluApproximate::None) return x * T(0.5) * (T(1) + std::erf(x * T(kSqrt1_2)));
  const T inner = T(kSqrt2OverPi) * (x + T(kKappa) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}

// exact: Phi(x) + x phi(x);  tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 k x^2)
template <class T>
T gelu_derivative(T x, GeluApproximate a) {
  if (a == GeluApproximate::None) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(kSqrt1_2)));
    const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
    return cdf + x * pdf;
  }
  const T inner = T(kSqrt2OverPi) * (x + T(kKappa) * x * x * x);
  const T t = std::tanh(inner);
  const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kKappa) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * d_inner;
}

}  // namespace nabla::gelu_math
