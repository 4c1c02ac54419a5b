#include "core/broadcast.h"

#include <fmt/format.h>

#include "core/autograd.h"
#include "core/strided_loop.h"

namespace nabla {

Tensor sum_to_kernel(const Tensor& x, const Shape& keepdim_shape) {
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
                for (int64_t i = 0; i < n; ++i) acc += p[i * inc[0]];
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
