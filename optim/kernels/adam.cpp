// Built with -ffp-contract=off and -fno-math-errno, as optim/adam.cpp (optim/CMakeLists.txt).
#include "nabla/optim/kernels/adam.h"

#include <algorithm>
#include <cmath>

#include "nabla/optim/multi_tensor.h"

namespace nabla::optim::kernels {
namespace {

// The update of elements [begin, end). The options are template parameters so that the loop has
// no branches and vectorises; with WeightDecay false the decay terms are skipped, which is exact
// (Adam adds 0 * p to g; AdamW multiplies p by 1 - lr * 0 = 1).
template <class T, bool Decoupled, bool AmsGrad, bool WeightDecay>
void adam_kernel(const AdamParam<T>& a, int64_t begin, int64_t end) {
  const AdamCoeffs& c = a.c;
  // Plain locals, not a structured binding: clang before 16 cannot use bindings inside the
  // `omp simd` loop, which it outlines as a captured statement.
  const AdamCoeffsIn<T> k = coeffs_in<T>(c);
  const T b1 = k.b1, b2 = k.b2, one_minus_b1 = k.one_minus_b1, one_minus_b2 = k.one_minus_b2;
  const T wd = k.wd, decay = k.decay, bc2_sqrt = k.bc2_sqrt, eps = k.eps, neg_step = k.neg_step;
  T *p = a.p, *m = a.m, *v = a.v, *vmax = a.vmax;
  const T* g = a.g;
  // Elementwise: the arrays are distinct tensors, and even aliased ones would only meet at the
  // same index, so there is no dependence between iterations.
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    T gi = g[i];
    if constexpr (Decoupled && WeightDecay) p[i] = p[i] * decay;
    if constexpr (!Decoupled && WeightDecay) gi = gi + wd * p[i];
    m[i] = m[i] * b1 + one_minus_b1 * gi;
    v[i] = v[i] * b2 + one_minus_b2 * gi * gi;
    T vi = v[i];
    if constexpr (AmsGrad) vi = vmax[i] = std::max(vmax[i], v[i]);
    const T denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = p[i] + neg_step * m[i] / denom;
  }
}

// All parameters of one dtype in one parallel region (see optim/multi_tensor.h).
template <class T, bool Decoupled, bool AmsGrad, bool WeightDecay>
void adam_multi_tensor(const std::vector<AdamParam<T>>& params) {
  std::vector<int64_t> sizes;
  for (const AdamParam<T>& a : params) sizes.push_back(a.n);
  parallel_for_segments(sizes, 16, [&](size_t k, int64_t b, int64_t e) {
    adam_kernel<T, Decoupled, AmsGrad, WeightDecay>(params[k], b, e);
  });
}

}  // namespace

// Picks the instantiation for the runtime options.
template <class T>
void adam_step(const std::vector<AdamParam<T>>& params, bool decoupled, bool amsgrad,
               bool weight_decay) {
  using Step = void (*)(const std::vector<AdamParam<T>>&);
  constexpr Step kSteps[2][2][2] = {
      {{adam_multi_tensor<T, false, false, false>, adam_multi_tensor<T, false, false, true>},
       {adam_multi_tensor<T, false, true, false>, adam_multi_tensor<T, false, true, true>}},
      {{adam_multi_tensor<T, true, false, false>, adam_multi_tensor<T, true, false, true>},
       {adam_multi_tensor<T, true, true, false>, adam_multi_tensor<T, true, true, true>}}};
  if (!params.empty()) kSteps[decoupled][amsgrad][weight_decay](params);
}

template void adam_step<float>(const std::vector<AdamParam<float>>&, bool, bool, bool);
template void adam_step<double>(const std::vector<AdamParam<double>>&, bool, bool, bool);

}  // namespace nabla::optim::kernels
