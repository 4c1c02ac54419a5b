#include "nabla/core/broadcast.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/copy.h"
#include "nabla/core/parallel.h"
#include "nabla/core/strided_loop.h"
#include "nabla/core/sum_lanes.h"

namespace nabla {

namespace {

// Sums a contiguous x viewed as (rows, cols) over its rows: the shape of a bias gradient. Each
// thread owns a block of columns and streams the rows through it; a walk down each column (the
// general loop below) would read one element per cache line.
template <class T, class Acc>
void sum_leading_rows(const T* x, T* out, int64_t rows, int64_t cols) {
  parallel_for(cols, rows, [&](int64_t b, int64_t e) {
    constexpr int64_t kBlock = 256;
    Acc acc[kBlock];
    for (int64_t c0 = b; c0 < e; c0 += kBlock) {
      const int64_t n = std::min(kBlock, e - c0);
      std::fill(acc, acc + n, Acc(0));
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = x + r * cols + c0;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) acc[c] += static_cast<Acc>(row[c]);
      }
      for (int64_t c = 0; c < n; ++c) out[c0 + c] = static_cast<T>(acc[c]);
    }
  });
}

// Every element of a contiguous x, in float64: blocks of a fixed size summed in parallel, then
// their sums in order, so the result does not depend on the thread count.
template <class T>
double sum_all(const T* x, int64_t n) {
  constexpr int64_t kBlock = int64_t{1} << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
  parallel_for(blocks, kBlock, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t begin = k * kBlock;
      partial[static_cast<size_t>(k)] = sum_lanes<double>(x + begin, std::min(kBlock, n - begin));
    }
  });
  return sum_lanes<double>(partial.data(), blocks);
}

// True when x is contiguous and keepdim_shape reduces exactly its leading dims.
bool reduces_leading_dims(const Tensor& x, const Shape& keepdim_shape) {
  if (!x.is_contiguous()) return false;
  size_t d = 0;
  while (d < keepdim_shape.size() && keepdim_shape[d] == 1 && x.shape()[d] != 1) ++d;
  for (; d < keepdim_shape.size(); ++d)
    if (keepdim_shape[d] != x.shape()[d]) return false;
  return true;
}

}  // namespace

Tensor sum_to_kernel(const Tensor& x, const Shape& keepdim_shape) {
  if (is_reduced_float(x.dtype())) {  // summed in float32, rounded once (ops/reduced_float.h)
    Tensor wide = empty(x.shape(), kFloat32);
    copy_kernel(wide, x);
    Tensor sum = sum_to_kernel(wide, keepdim_shape);
    Tensor out = empty(keepdim_shape, x.dtype());
    copy_kernel(out, sum);
    return out;
  }
  if (x.numel() > 0 && x.is_contiguous() && shape_numel(keepdim_shape) == 1 &&
      (x.dtype() == kFloat32 || x.dtype() == kFloat64)) {
    Tensor out = empty(keepdim_shape, x.dtype());
    if (x.dtype() == kFloat32) {
      out.data_ptr<float>()[0] = static_cast<float>(sum_all(x.data_ptr<float>(), x.numel()));
    } else {
      out.data_ptr<double>()[0] = sum_all(x.data_ptr<double>(), x.numel());
    }
    return out;
  }
  if (x.numel() > 0 && reduces_leading_dims(x, keepdim_shape) &&
      (x.dtype() == kFloat32 || x.dtype() == kFloat64)) {
    Tensor out = empty(keepdim_shape, x.dtype());
    const int64_t cols = out.numel(), rows = x.numel() / cols;
    if (x.dtype() == kFloat32) {
      sum_leading_rows<float, double>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    } else {
      sum_leading_rows<double, double>(x.data_ptr<double>(), out.data_ptr<double>(), rows, cols);
    }
    return out;
  }
  // Split x's dims into kept (outer, one output element each) and reduced (inner loop).
  const size_t nd = x.shape().size();
  Shape kept_shape, kept_strides, red_shape, red_strides;
  for (size_t d = 0; d < nd; ++d) {
    if (keepdim_shape[d] == x.shape()[d]) {
      kept_shape.push_back(x.shape()[d]);
      kept_strides.push_back(x.strides()[d]);
    } else {
      red_shape.push_back(x.shape()[d]);
      red_strides.push_back(x.strides()[d]);
    }
  }
  Tensor out = empty(keepdim_shape, x.dtype());
  const int64_t n_out = shape_numel(kept_shape);
  const int64_t n_red = shape_numel(red_shape);
  dispatch_numeric(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const T* xp = x.data_ptr<T>();
    T* op = out.data_ptr<T>();
    const Shape kept_contig = contiguous_strides(kept_shape);
    parallel_for(n_out, std::max<int64_t>(n_red, 1), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        int64_t base = 0, rem = o;
        for (size_t d = 0; d < kept_shape.size(); ++d) {
          base += (rem / kept_contig[d]) * kept_strides[d];
          rem %= kept_contig[d];
        }
        Acc acc = 0;
        if (n_red > 0) {
          // NOTE: cost 0 keeps this inner loop serial: every run adds into the one `acc`, so
          // splitting it across threads (when n_out is 1) would be a data race.
          strided_for_each<1>(
              red_shape, {red_strides}, 0,
              [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& inc) {
                const T* p = xp + base + off[0];
                if (inc[0] == 1) {
                  acc += sum_lanes<Acc>(p, n);
                } else {
                  for (int64_t i = 0; i < n; ++i) acc += p[i * inc[0]];
                }
              });
        }
        op[o] = static_cast<T>(acc);
      }
    });
  });
  return out;
}

// ----------------------------------------------------------------------------
// sum_to
//   forward:   y = x summed over the dims that broadcasting to x.shape would have expanded
//   backward:  grad_x = grad.expand(x.shape)
struct SumToBackward final : Node {
  Shape input_shape;
  explicit SumToBackward(Shape s) : input_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad.expand(input_shape)}; }
  const char* name() const override { return "SumToBackward"; }
};

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (shape.size() > x.shape().size() || broadcast_shapes("sum_to", shape, x.shape()) != x.shape())
    throw ShapeError(fmt::format("sum_to: shape {} cannot be summed down to {}",
                                 shape_str(x.shape()), shape_str(shape)));
  Shape keep(x.shape().size(), 1);
  const size_t lead = x.shape().size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) keep[lead + i] = shape[i];
  Tensor y = sum_to_kernel(x, keep);
  y.impl().shape = shape;  // same elements, same contiguous order: just drop the kept 1s
  y.impl().strides = contiguous_strides(shape);
  if (auto node = make_node<SumToBackward>({&x}, x.shape())) set_history(y, node);
  return y;
}

}  // namespace nabla
