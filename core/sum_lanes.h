// Sums of contiguous runs with independent partial sums. One running sum makes every add wait
// for the previous one (~4 cycles each); 16 lanes let the adds pipeline and vectorise. The
// order depends on n alone, so the bits are the same for any thread count.
#pragma once
#include <cstdint>

namespace nabla {

// The sum over i in [0, n) of f(Acc(p[i])), in Acc.
template <class Acc, class T, class F>
Acc sum_lanes(const T* p, int64_t n, F f) {
  constexpr int64_t kLanes = 16;
  Acc lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) lanes[k] += f(static_cast<Acc>(p[i + k]));
  Acc tail = 0;
  for (; i < n; ++i) tail += f(static_cast<Acc>(p[i]));
  for (int64_t width = kLanes / 2; width > 0; width /= 2)
    for (int64_t k = 0; k < width; ++k) lanes[k] += lanes[k + width];
  return lanes[0] + tail;
}

template <class Acc, class T>
Acc sum_lanes(const T* p, int64_t n) {
  return sum_lanes<Acc>(p, n, [](Acc v) { return v; });
}

}  // namespace nabla
