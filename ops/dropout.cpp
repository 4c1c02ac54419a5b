// dropout. The mask is saved as a bool tensor (1 byte per element) rather than a float one.
#include "ops/dropout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"

namespace nabla {
namespace {

// n elements from their Philox words: keep iff word >= threshold; y = keep ? x * scale : 0.
template <class T>
void dropout_kernel(const uint32_t* words, const T* x, T* y, bool* keep, int64_t n,
                    uint64_t threshold, T scale) {
  for (int64_t i = 0; i < n; ++i) {
    const bool k = words[i] >= threshold;
    keep[i] = k;
    y[i] = k ? x[i] * scale : T(0);
  }
}

// grad_x = keep ? grad * scale : 0 over n elements. The mask is read as bytes (a bool is 0 or 1):
// GCC does not vectorise loads of bool.
template <class T>
void dropout_backward_kernel(const uint8_t* keep, const T* grad, T* grad_x, int64_t n, T scale) {
  for (int64_t i = 0; i < n; ++i) grad_x[i] = keep[i] != 0 ? grad[i] * scale : T(0);
}

}  // namespace

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
    const auto* keep_bytes = reinterpret_cast<const uint8_t*>(k.data_ptr<bool>());
    dispatch_float(grad.dtype(), "dropout", [&](auto tag) {
      using T = decltype(tag);
      const T* gp = g.data_ptr<T>();
      T* op = gx.data_ptr<T>();
      const T s = static_cast<T>(scale);
      parallel_for(g.numel(), 1, [&](int64_t b, int64_t e) {
        dropout_backward_kernel<T>(keep_bytes + b, gp + b, op + b, e - b, s);
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
  // keep iff u >= p with u = word / 2^32, i.e. word >= ceil(p * 2^32) (p < 1 here).
  const auto threshold = static_cast<uint64_t>(std::ceil(p * 0x1.0p32));
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    const T s = static_cast<T>(scale);
    parallel_for(n, 4, [&](int64_t b, int64_t e) {
      // The words of a piece of elements come from Generator::blocks (vectorised) into a buffer
      // that stays in L1; a piece starts on a block boundary, so words[i - start] is element i's.
      constexpr int64_t kPiece = 1024;
      alignas(64) uint32_t words[kPiece];
      for (int64_t start = b / 4 * 4; start < e; start += kPiece) {
        const int64_t end = std::min(e, start + kPiece);
        gen.blocks(first + static_cast<uint64_t>(start / 4), (end - start + 3) / 4, words);
        const int64_t from = std::max(b, start);
        dropout_kernel<T>(words + (from - start), xp + from, yp + from, kp + from, end - from,
                          threshold, s);
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
