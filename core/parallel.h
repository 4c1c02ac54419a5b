// Threading: one knob (OMP_NUM_THREADS or set_num_threads) for our OpenMP loops and OpenBLAS.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace nabla {

int num_threads();
void set_num_threads(int n);  // also sets OpenBLAS's pool
std::string runtime_info();   // OpenBLAS config, core type, thread count

// Loops cheaper than this (elements x cost) run on one thread: below it, waking the pool costs
// more than the work. Measured by bench/parallel_grain.cpp on the 2-core VM: a float exp loop
// (cost 8) breaks even at 8-16K elements and is 1.3x faster at 16K; a memory-bound add (cost 1)
// barely gains on 2 threads at any size (0.83x below 64K elements, 1.0x above).
inline constexpr int64_t kParallelGrain = 131072;

// Runs f(begin, end) over [0, n) in contiguous chunks, in parallel when n * cost_per_item is
// large and we are not already inside a parallel region. f must not throw.
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& f) {
  if (n <= 0) return;
  if (n == 1 || n * cost_per_item < kParallelGrain || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = std::min(n, tid * chunk), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

}  // namespace nabla
