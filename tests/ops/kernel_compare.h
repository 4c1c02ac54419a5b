// Tuned kernels against their reference kernels: the same call made once with each (through
// kernels::TunedKernelsGuard), forward and backward. The backward comparison differentiates one
// graph (built by the tuned forward) once with each kernel, so both backward kernels see the same
// saved tensors and differ only in their own arithmetic.
#pragma once
#include <cstring>
#include <functional>
#include <vector>

#include "ops/kernels/kernels.h"
#include "tests/helpers.h"

namespace nabla::test {

struct KernelComparison {
  Tensor tuned, reference;                           // forward outputs
  std::vector<Tensor> tuned_grads, reference_grads;  // d(sum(out * g)) / d(inputs)
};

using KernelFn = std::function<Tensor(const std::vector<Tensor>&)>;

// The upstream gradient compare_kernels uses for an output of `shape`.
inline Tensor upstream_grad(const Shape& shape, DType dt) {
  Generator g(99);
  return randn(shape, g, dt);
}

inline KernelComparison compare_kernels(const KernelFn& fn, const std::vector<Tensor>& inputs) {
  KernelComparison c;
  {
    kernels::TunedKernelsGuard reference(false);
    c.reference = fn(inputs).detach();
  }
  kernels::TunedKernelsGuard tuned(true);
  Tensor y = fn(inputs);
  c.tuned = y.detach();
  Tensor upstream = upstream_grad(y.shape(), y.dtype());
  c.tuned_grads = autograd::grad({y}, inputs, {upstream}, /*retain_graph=*/true);
  kernels::TunedKernelsGuard reference(false);
  c.reference_grads = autograd::grad({y}, inputs, {upstream});
  return c;
}

// The same shape, floating dtype and bits, element by element (so -0 differs from 0).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  bool same = false;
  dispatch_float(a.dtype(), "bitwise_equal", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> x = a.to_vector<T>(), y = b.to_vector<T>();
    same = x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
  });
  return same;
}

#define CHECK_BITWISE(a, b)                                                     \
  do {                                                                          \
    INFO("actual:   " << (a).to_string() << "\nexpected: " << (b).to_string()); \
    CHECK(::nabla::test::bitwise_equal((a), (b)));                              \
  } while (0)

// Forward and every gradient bitwise equal.
inline void check_bitwise(const KernelComparison& c) {
  CHECK_BITWISE(c.tuned, c.reference);
  for (size_t i = 0; i < c.tuned_grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK_BITWISE(c.tuned_grads[i], c.reference_grads[i]);
  }
}

// |a - b| <= bound element by element, in float64; bound broadcasts to a's shape.
inline void check_within(const Tensor& a, const Tensor& b, const Tensor& bound) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to(kFloat64).to_vector<double>();
  const std::vector<double> y = b.to(kFloat64).to_vector<double>();
  const std::vector<double> z = bound.to(kFloat64).expand(a.shape()).to_vector<double>();
  double worst = 0;  // the largest |a - b| / bound
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(z[i], 1e-300));
  INFO("largest |difference| / bound: " << worst);
  CHECK(worst <= 1.0);
}

}  // namespace nabla::test
