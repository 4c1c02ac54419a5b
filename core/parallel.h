// Threading. num_threads() (OMP_NUM_THREADS or set_num_threads) fixes how work is split: a loop
// runs as num_threads() parts whatever happens, so its result never depends on the load. How many
// threads run those parts adapts: active_threads() drops to the cores that other processes leave
// free (core/cpu_load.h), because OpenMP threads sharing a busy core wait for each other at every
// barrier and a step then takes many times longer than on one thread.
//
// Deterministic mode (set_deterministic, NABLA_DETERMINISTIC=1) goes one step further: loops and
// GEMMs split into kDeterministicParts parts whatever num_threads() is, and OpenBLAS never
// threads a call itself, so results are bitwise the same for any thread count (1, 2, ... 8 busy
// threads; a 9th has no part to run). Its cost is in docs/reliability.md, "Determinism".
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "nabla/core/machine.h"

namespace nabla {

int num_threads();            // parts a parallel loop is split into
void set_num_threads(int n);  // also sets OpenBLAS's pool
int active_threads();         // threads that run those parts now, 1..num_threads()
// Adaptive (the default) follows the free cores; off, active_threads() == num_threads().
// NABLA_ADAPTIVE_THREADS=0 in the environment turns it off at start.
void set_adaptive_threads(bool on);
bool adaptive_threads();
std::string runtime_info();  // OpenBLAS config, core type, thread counts, load, machine profile
// The kernel set OpenBLAS runs ("Haswell", "SkylakeX", ...: openblas_get_corename()).
std::string blas_kernel_set();

inline constexpr int kDeterministicParts = 8;
// On: results independent of the thread count (above). NABLA_DETERMINISTIC=1 turns it on at start.
void set_deterministic(bool on);
bool deterministic();
// Parts a parallel loop or a split GEMM is cut into: num_threads(), or kDeterministicParts in
// deterministic mode.
int split_parts();

namespace detail {
// True on a thread while it runs a part of run_parts (with more than one part), also when the
// parts run one after another: a loop nested in a part then runs whole, the same way whether
// the outer parts ran in parallel or (under load) in sequence.
inline thread_local bool running_part = false;
struct PartScope {
  bool prev = running_part;
  PartScope() { running_part = true; }
  ~PartScope() { running_part = prev; }
  PartScope(const PartScope&) = delete;
  PartScope& operator=(const PartScope&) = delete;
};
}  // namespace detail

// Inside a part of a parallel loop (or any OpenMP region): nested loops run whole there.
inline bool in_parallel_part() { return detail::running_part || omp_in_parallel(); }

// Loops cheaper than this (elements x cost) run on one thread: below it, waking the pool costs
// more than the work. The value depends on the machine (core/machine.h); measured by
// bench/parallel_grain.cpp on a 2-core VM: a float exp loop (cost 8) breaks even at 8-16K
// elements and is 1.3x faster at 16K; a memory-bound add (cost 1) barely gains on 2 threads at
// any size (0.83x below 64K elements, 1.0x above).
inline int64_t parallel_grain() { return machine::profile().parallel_grain; }

namespace detail {
// Parts run on the calling thread go through this call, not inlined into run_parts: inlined there,
// GCC 12 left some loop bodies scalar (relu at 1 thread took 4.7 ns an element against 0.08 on
// the same thread below the grain, a branch per element; AMD EPYC Zen 4, -O3 -march=native),
// while the OpenMP region's outlined copy was vectorised. Out of line, both compile alike.
template <class F>
[[gnu::noinline]] void run_parts_here(int64_t first, int64_t end, F& part) {
  for (int64_t p = first; p < end; ++p) part(p);
}
}  // namespace detail

// Runs part(p) for p in [0, parts), spread over the active threads (in order on one thread when
// only one is active). part must not throw.
template <class F>
void run_parts(int64_t parts, F&& part) {
  if (parts == 1) {
    detail::run_parts_here(0, 1, part);
    return;
  }
  const int threads = static_cast<int>(std::min<int64_t>(active_threads(), parts));
  if (threads <= 1) {
    detail::PartScope scope;
    detail::run_parts_here(0, parts, part);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    detail::PartScope scope;
    for (int64_t p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) part(p);
  }
}

// Runs f(begin, end) over [0, n) in split_parts() contiguous chunks, in parallel when
// n * cost_per_item is large and we are not already inside a parallel part. f must not throw.
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& f) {
  if (n <= 0) return;
  if (n == 1 || n * cost_per_item < parallel_grain() || in_parallel_part()) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t parts = std::min<int64_t>(split_parts(), n);
  const int64_t chunk = (n + parts - 1) / parts;
  run_parts(parts, [&](int64_t p) {
    const int64_t b = std::min(n, p * chunk), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  });
}

}  // namespace nabla
