// dropout. The mask is saved as a bool tensor (1 byte per element) rather than a float one.
// The tuned kernels (vectorised Philox words, vectorised loops) are in ops/kernels/dropout.*.
#include "nabla/ops/dropout.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/kernels/dropout.h"
#include "nabla/ops/kernels/kernels.h"

namespace nabla {

// ----------------------------------------------------------------------------
// dropout
//   forward:   keep_i = (u_i >= p), u_i uniform in [0, 1);  y = x * keep * scale,
//              scale = 1 / (1 - p)  (0 when p == 1)
//   backward:  grad_x = grad * keep * scale      saves keep (bool)
namespace {

// Reference kernels: one element at a time. Element i's uniform is word i % 4 of Philox block
// first + i / 4 (a block holds four 32-bit words); it is kept iff word / 2^32 >= p.
template <class T>
void dropout_reference(const Generator& gen, uint64_t first, uint64_t threshold, T scale,
                       const T* x, T* y, bool* keep, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t word = gen.block(first + static_cast<uint64_t>(i / 4))[i % 4];
    keep[i] = word >= threshold;
    y[i] = keep[i] ? x[i] * scale : T(0);
  }
}

template <class T>
void dropout_backward_reference(const bool* keep, T scale, const T* grad, T* grad_x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) grad_x[i] = keep[i] ? grad[i] * scale : T(0);
}

}  // namespace

struct DropoutBackward final : Node {
  SavedTensor keep{this, "keep"};
  double scale;
  explicit DropoutBackward(double s) : scale(s) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor k = keep.get();
    if (GradMode::enabled()) return {mul(grad, mul(k.to(grad.dtype()), scale))};
    Tensor g = grad.contiguous(), gx = empty(grad.shape(), grad.dtype());
    dispatch_float(grad.dtype(), "dropout", [&](auto tag) {
      using T = decltype(tag);
      const auto s = static_cast<T>(scale);
      if (kernels::tuned_enabled()) {
        kernels::dropout_backward<T>(k.data_ptr<bool>(), s, g.data_ptr<T>(), gx.data_ptr<T>(),
                                     g.numel());
      } else {
        dropout_backward_reference<T>(k.data_ptr<bool>(), s, g.data_ptr<T>(), gx.data_ptr<T>(),
                                      g.numel());
      }
    });
    return {gx};
  }
  const char* name() const override { return "DropoutBackward"; }
};

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  inspect::OpScope op_scope("dropout", {&x});
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
  // keep iff u >= p with u = word / 2^32, i.e. word >= ceil(p * 2^32) (p < 1 here).
  const auto threshold = static_cast<uint64_t>(std::ceil(p * 0x1.0p32));
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const auto s = static_cast<T>(scale);
    if (kernels::tuned_enabled()) {
      kernels::dropout_forward<T>(gen, first, threshold, s, xc.data_ptr<T>(), y.data_ptr<T>(),
                                  keep.data_ptr<bool>(), n);
    } else {
      dropout_reference<T>(gen, first, threshold, s, xc.data_ptr<T>(), y.data_ptr<T>(),
                           keep.data_ptr<bool>(), n);
    }
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
