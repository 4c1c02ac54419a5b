// PrepackedLinear (ops/linear_prepacked.h says when it runs and why).
#include "nabla/ops/linear_prepacked.h"

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/machine.h"
#include "nabla/core/parallel.h"
#include "nabla/core/storage.h"
#include "nabla/ops/autocast.h"
#include "nabla/ops/gemm.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/linear.h"
#include "nabla/ops/kernels/onednn.h"

namespace nabla {

// The packed weight and what identifies the tensor it was packed from.
struct PrepackedLinear::Slot {
  std::weak_ptr<Storage> storage;
  int64_t offset = 0;
  Shape shape, strides;
  uint64_t version = 0;
  onednn::PackedF32Weights packed;

  bool packs(const Tensor& w) const {
    const std::shared_ptr<Storage> s = storage.lock();
    return s && s == w.storage() && offset == w.offset() && version == s->version() &&
           shape == w.shape() && strides == w.strides();
  }
};

namespace {

// Everything but the size: float32 operands of linear()'s shapes, nothing recorded, the tuned
// kernels, no autocast, not deterministic.
bool call_qualifies(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (x.dtype() != kFloat32 || w.dtype() != kFloat32 || (b.defined() && b.dtype() != kFloat32))
    return false;
  if (x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(1) || w.size(1) == 0) return false;
  if (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0))) return false;
  if (GradMode::enabled() &&
      (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad())))
    return false;
  return kernels::tuned_enabled() && !deterministic() && !autocast::applies({&x, &w, &b});
}

}  // namespace

bool prepacked_linear_chosen(int64_t m, int64_t n, int64_t k) {
  const int64_t min_flop = machine::profile().prepacked_linear_min_flop;
  return min_flop >= 0 && 2 * m * n * k >= min_flop && onednn::available();
}

std::shared_ptr<const PrepackedLinear::Slot> PrepackedLinear::slot_for(const Tensor& w) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (slot_ && slot_->packs(w)) return slot_;
  auto slot = std::make_shared<Slot>();
  slot->storage = w.storage();
  slot->offset = w.offset();
  slot->shape = w.shape();
  slot->strides = w.strides();
  slot->version = w.storage()->version();
  const Tensor rows = w.detach().contiguous();
  slot->packed = onednn::PackedF32Weights(w.size(0), w.size(1), rows.data_ptr<float>());
  slot_ = slot;
  ++packs_;
  return slot_;
}

Tensor PrepackedLinear::try_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    std::optional<LinearActivation> act) const {
  if (!call_qualifies(x, weight, bias)) return {};
  const int64_t in = weight.size(1), out = weight.size(0), m = x.numel() / in;
  if (m == 0 || out == 0 || !prepacked_linear_chosen(m, out, in)) return {};
  inspect::OpScope op_scope(act ? "linear_activation" : "linear", {&x, &weight, &bias});
  op_scope.count_flops([&] { return 2 * m * out * in; });
  const std::shared_ptr<const Slot> slot = slot_for(weight);
  Tensor x2d = x.detach().reshape({m, in});
  if (!blas::BlasView::of(x2d).row_major) x2d = x2d.contiguous();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = empty({m, out}, kFloat32);
  onednn::F32Linear p;
  p.m = m, p.n = out, p.k = in, p.ldx = blas::BlasView::of(x2d).ld, p.ldc = out;
  {
    inspect::GemmScope gemm_scope(m, out, in, kFloat32);
    onednn::linear_f32(p, x2d.data_ptr<float>(), slot->packed,
                       b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
  }
  // The activation in nabla's pass (linear_activation's), not as a oneDNN post-op: the post-op's
  // JIT generator keeps ~0.7 MB more of libdnnl resident for ReLU's 1.6% on one product (GELU's
  // own pass is faster than oneDNN's; docs/perf.md, "Inference: weights packed once").
  if (act) kernels::linear_activation_forward(y, y, *act);
  Shape y_shape(x.shape().begin(), x.shape().end() - 1);
  y_shape.push_back(out);
  reshape_fresh_(y, y_shape);
  return y;
}

int64_t PrepackedLinear::packs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return packs_;
}

int64_t PrepackedLinear::packed_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slot_ ? slot_->packed.packed_bytes() : 0;
}

onednn::Activation onednn_activation(std::optional<LinearActivation> act) {
  if (!act) return onednn::Activation::None;
  switch (*act) {
    case LinearActivation::ReLU:
      return onednn::Activation::ReLU;
    case LinearActivation::GELU:
      return onednn::Activation::GELU;
    case LinearActivation::GELUTanh:
      return onednn::Activation::GELUTanh;
  }
  return onednn::Activation::None;
}

}  // namespace nabla
