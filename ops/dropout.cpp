// dropout. The mask is saved as a bool tensor (1 byte per element) rather than a float one.
#include "ops/dropout.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"

namespace nabla {

// ----------------------------------------------------------------------------
// dropout
//   forward:   keep_i = (u_i >= p), u_i uniform in [0, 1);  y = x * keep * scale,
//              scale = 1 / (1 - p)  (0 when p == 1)
//   backward:  grad_x = grad * keep * scale      saves keep (bool)
struct DropoutBackward final : Node {
  SavedTensor keep{this};
  double scale;
  explicit DropoutBackward(double s) : scale(s) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor k = keep.get();
    if (GradMode::enabled()) return {mul(grad, mul(k.to(grad.dtype()), scale))};
    Tensor g = grad.contiguous(), gx = empty(grad.shape(), grad.dtype());
    const bool* kp = k.data_ptr<bool>();
    dispatch_float(grad.dtype(), "dropout", [&](auto tag) {
      using T = decltype(tag);
      const T* gp = g.data_ptr<T>();
      T* op = gx.data_ptr<T>();
      const T s = static_cast<T>(scale);
      parallel_for(g.numel(), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) op[i] = kp[i] ? gp[i] * s : T(0);
      });
    });
    return {gx};
  }
  const char* name() const override { return "DropoutBackward"; }
};

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p <= 1.0))
    throw ValueError(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("dropout: x must be float32 or float64, got {} {}",
                                 dtype_name(x.dtype()), shape_str(x.shape())));
  if (p == 0.0 || !training) return x;
  const int64_t n = x.numel();
  // One Philox block gives four 32-bit uniforms: element i uses word i % 4 of block i / 4.
  const uint64_t first = gen.advance(static_cast<uint64_t>((n + 3) / 4));
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  Tensor xc = x.detach().contiguous();
  Tensor keep = empty(x.shape(), kBool), y = empty(x.shape(), x.dtype());
  bool* kp = keep.data_ptr<bool>();
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    const T s = static_cast<T>(scale);
    // keep iff u >= p with u = word / 2^32, i.e. word >= ceil(p * 2^32) (p < 1 here).
    const auto threshold = static_cast<uint64_t>(std::ceil(p * 0x1.0p32));
    parallel_for(n, 16, [&](int64_t b, int64_t e) {
      std::array<uint32_t, 4> words = gen.block(first + static_cast<uint64_t>(b / 4));
      for (int64_t i = b; i < e; ++i) {
        if (i % 4 == 0) words = gen.block(first + static_cast<uint64_t>(i / 4));
        kp[i] = words[static_cast<size_t>(i % 4)] >= threshold;
        yp[i] = kp[i] ? xp[i] * s : T(0);
      }
    });
  });
  if (auto node = make_node<DropoutBackward>({&x}, scale)) {
    node->keep.save(keep);
    set_history(y, node);
  }
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  return dropout(x, p, training, default_generator());
}

}  // namespace nabla
