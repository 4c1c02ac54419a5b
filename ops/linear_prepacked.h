// Inference linear on a weight packed once (issue 16, item 3). OpenBLAS has no packed-weight
// sgemm: every call of linear() copies the constant weight into OpenBLAS's panels again
// (`sgemm_oncopy`, ~8% of encoder_infer). A module that owns a weight holds a PrepackedLinear
// beside it; when no graph is recorded, the call is float32 and the machine profile picks oneDNN
// for its size (core/machine.h: prepacked_linear_min_flop), the product runs on oneDNN's f32
// matmul with the weight packed once into its kernel's layout and the bias in the kernel
// (ops/kernels/onednn.h: linear_f32); ReLU/GELU follow in linear_activation's own pass, which
// keeps oneDNN's post-op code out of memory (docs/perf.md). Everything else takes linear() as
// before: a recorded call (grad mode on and an operand requiring grad), float64 and bfloat16,
// autocast, reference kernels, deterministic mode (OpenBLAS's split is the one whose bits do not
// depend on the thread count) and builds without oneDNN.
//
// The packed copy is tied to the weight's storage (held weakly, so a new tensor at the same
// address is not taken for it), offset, shape, strides and version counter: any in-place change
// (an optimizer step, load_state_dict, fill_), set_data_ (to(), prune_heads) or another weight
// packs again at the next call. A write through a raw data pointer bumps no version and is not
// seen, as with every saved tensor.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "nabla/core/tensor.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/linear.h"

namespace nabla {

// The product the profile picks for an inference linear of m rows, k inputs and n outputs when
// the call qualifies (above): true for oneDNN (and oneDNN is built in), false for OpenBLAS.
bool prepacked_linear_chosen(int64_t m, int64_t n, int64_t k);

// A fused activation as oneDNN's post-op (also the int8 Linear's, nn/quantized.cpp).
onednn::Activation onednn_activation(std::optional<LinearActivation> act);

class PrepackedLinear {
 public:
  PrepackedLinear() = default;
  // A module's copy packs its own weight: copies start empty.
  PrepackedLinear(const PrepackedLinear&) {}
  PrepackedLinear& operator=(const PrepackedLinear&) { return *this; }

  // act(x weight^T + bias) through the packed weight, with linear()'s shapes; an undefined
  // tensor when the call does not qualify, and the caller runs linear() or linear_activation().
  Tensor try_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     std::optional<LinearActivation> act = std::nullopt) const;
  // How many times a weight was packed (a change of weight packs again), and the packed bytes.
  int64_t packs() const;
  int64_t packed_bytes() const;

 private:
  struct Slot;
  std::shared_ptr<const Slot> slot_for(const Tensor& weight) const;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Slot> slot_;
  mutable int64_t packs_ = 0;
};

}  // namespace nabla
