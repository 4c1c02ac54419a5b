// Tuned kernels against the reference kernels in the op files (ops/kernels/kernels.h): run a
// function with the tuned kernels switched on and then off, and compare the results bitwise or
// within a stated bound. compare_kernels differentiates one graph (built by the tuned forward)
// once with each kernel, so both backward kernels see the same saved tensors.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "nabla/ops/kernels/kernels.h"
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
inline bool bitwise_equal(const Tensor& a, const Tensor& b) { return same_bits(a, b); }

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
