// The one generic strided loop behind every elementwise kernel, copy and reduction in core/ and
// ops/. Operands are described by element strides over a common shape (stride 0 = broadcast).
// Adjacent dims that are contiguous for every operand are merged, so the common cases become one
// flat loop; the innermost dim runs as a plain pointer loop.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "nabla/core/parallel.h"
#include "nabla/core/shape.h"

namespace nabla {

template <size_t N>
struct StridedLayout {
  Shape shape;                   // merged shape (at least one dim)
  std::array<Shape, N> strides;  // per operand, per merged dim
};

template <size_t N>
StridedLayout<N> merge_dims(const Shape& shape, const std::array<Shape, N>& strides) {
  StridedLayout<N> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims contribute nothing
    bool merge = !out.shape.empty();
    for (size_t k = 0; merge && k < N; ++k)
      merge = out.strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      out.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// True if every operand is row-major over `shape` (dims of size 1 aside): merge_dims would then
// make the whole shape one run of unit stride.
template <size_t N>
bool all_row_major(const Shape& shape, const std::array<Shape, N>& strides) {
  for (size_t k = 0; k < N; ++k) {
    int64_t expected = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] == 1) continue;
      if (strides[k][d] != expected) return false;
      expected *= shape[d];
    }
  }
  return true;
}

// Calls f(offsets, n, inner_strides) for each run of the innermost merged dim, where offsets are
// the operands' element offsets at the start of the run. Parallel over runs for large shapes.
template <size_t N, class F>
void strided_for_each(const Shape& shape, const std::array<Shape, N>& strides, int64_t cost,
                      F&& f) {
  const int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  if (numel > 1 && all_row_major<N>(shape, strides)) {
    // The layout merge_dims would build, without building it (a tiny op's largest cost after
    // allocation): one run of numel elements, split across threads as below.
    std::array<int64_t, N> unit;
    unit.fill(1);
    parallel_for(numel, cost, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off;
      off.fill(b);
      f(off, e - b, unit);
    });
    return;
  }
  StridedLayout<N> lay = merge_dims<N>(shape, strides);
  const int64_t nd = static_cast<int64_t>(lay.shape.size());
  const int64_t inner = lay.shape[nd - 1];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = lay.strides[k][nd - 1];
  int64_t outer = 1;
  for (int64_t d = 0; d < nd - 1; ++d) outer *= lay.shape[d];

  if (outer == 1) {  // one run: split it across threads
    parallel_for(inner, cost, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = b * inner_strides[k];
      f(off, e - b, inner_strides);
    });
    return;
  }
  parallel_for(outer, inner * cost, [&](int64_t b, int64_t e) {
    // Decompose the first run index into per-dim counters, then step like an odometer.
    std::vector<int64_t> idx(static_cast<size_t>(nd - 1));
    std::array<int64_t, N> off{};
    int64_t rem = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % lay.shape[d];
      rem /= lay.shape[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * lay.strides[k][d];
    }
    for (int64_t r = b; r < e; ++r) {
      f(off, inner, inner_strides);
      for (int64_t d = nd - 2; d >= 0; --d) {
        ++idx[d];
        for (size_t k = 0; k < N; ++k) off[k] += lay.strides[k][d];
        if (idx[d] < lay.shape[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= idx[d] * lay.strides[k][d];
        idx[d] = 0;
      }
    }
  });
}

// Strides of tensor-with-`shape`-and-`strides` broadcast to `out_shape` (0 where broadcast).
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out_shape);

}  // namespace nabla
