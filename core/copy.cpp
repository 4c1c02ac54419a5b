#include "nabla/core/copy.h"

#include <cstring>

#include "nabla/core/strided_loop.h"

namespace nabla {

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out_shape) {
  Shape out(out_shape.size(), 0);
  size_t lead = out_shape.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) out[lead + i] = shape[i] == 1 ? 0 : strides[i];
  return out;
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  std::array<Shape, 2> st = {dst.strides(),
                             broadcast_strides(src.shape(), src.strides(), dst.shape())};
  dispatch_all(dst.dtype(), [&](auto dt) {
    using D = decltype(dt);
    D* d = dst.data_ptr<D>();
    dispatch_all(src.dtype(), [&](auto st_) {
      using S = decltype(st_);
      const S* s = src.data_ptr<S>();
      strided_for_each<2>(
          dst.shape(), st, 1,
          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& inc) {
            D* dp = d + off[0];
            const S* sp = s + off[1];
            if constexpr (std::is_same_v<D, S>) {
              if (inc[0] == 1 && inc[1] == 1) {
                std::memcpy(dp, sp, static_cast<size_t>(n) * sizeof(D));
                return;
              }
            }
            if (inc[0] == 1 && inc[1] == 1) {  // a conversion in its own loop, to vectorise
              if constexpr (std::is_same_v<S, bool>) {
                // GCC 12 does not vectorise loads of bool; the same bytes as unsigned char it
                // does (a bool mask to float: 0.17 -> ~0.02 ms for 460K elements, Zen 4).
                const auto* bytes = reinterpret_cast<const unsigned char*>(sp);
                for (int64_t i = 0; i < n; ++i) dp[i] = static_cast<D>(bytes[i] != 0);
              } else {
                for (int64_t i = 0; i < n; ++i) dp[i] = static_cast<D>(sp[i]);
              }
              return;
            }
            for (int64_t i = 0; i < n; ++i) dp[i * inc[0]] = static_cast<D>(sp[i * inc[1]]);
          });
    });
  });
}

}  // namespace nabla
