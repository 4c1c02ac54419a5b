// Multi-tensor apply: one parallel region over the elements of many tensors (an optimizer's
// parameters), instead of one region per tensor. A model has tens of small parameters; waking the
// thread pool for each costs more than updating it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "nabla/core/parallel.h"

namespace nabla::optim {

// Runs f(k, begin, end) over [0, sizes[k]) for every segment k, as if the segments were one range
// of sum(sizes) items split by parallel_for: each thread takes an equal share of the total and
// walks the segments its share overlaps, one call per segment part. f must not throw.
template <class F>
void parallel_for_segments(const std::vector<int64_t>& sizes, int64_t cost_per_item, F&& f) {
  std::vector<int64_t> starts(sizes.size() + 1, 0);  // segment k is [starts[k], starts[k + 1])
  for (size_t k = 0; k < sizes.size(); ++k) starts[k + 1] = starts[k] + sizes[k];
  parallel_for(starts.back(), cost_per_item, [&](int64_t b, int64_t e) {
    // The last segment that starts at or before b is the one holding b (empty ones are skipped).
    auto k =
        static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), b) - starts.begin() - 1);
    for (; k < sizes.size() && starts[k] < e; ++k) {
      const int64_t lo = std::max(b, starts[k]), hi = std::min(e, starts[k + 1]);
      if (lo < hi) f(k, lo - starts[k], hi - starts[k]);
    }
  });
}

}  // namespace nabla::optim
