// Dynamic int8 quantisation of Linear layers for inference, as PyTorch's
// torch.ao.quantization.quantize_dynamic with per_channel_dynamic_qconfig
// (https://pytorch.org/docs/stable/generated/torch.ao.quantization.quantize_dynamic.html):
// - weights: signed 8-bit, symmetric, one scale per output channel (row j of W):
//   s_j = max_t |W[j, t]| / 127, q = round(W / s_j) in [-127, 127] (s_j = 1 for a zero row);
// - activations: unsigned 8-bit, asymmetric, one scale and zero point per call ("per batch")
//   from the input's min and max with 0 in the range (PyTorch's choose_qparams);
//   7 bits (0..127, PyTorch's reduce_range) on CPUs without VNNI, whose u8 x s8 pair
//   instructions saturate at 16 bits;
// - the product: oneDNN's int8 matmul, exact int32 sums, scaled to float32, plus the float bias
//   and the activation in the same kernel; the weight packed once, when quantised, into the
//   layout that kernel reads (ops/kernels/onednn.h).
// Storage: the model's quantised weight is its unpadded int8 rows (out x in bytes) and one float32
// scale per row; the packed copy (oneDNN pads its columns and adds column sums) is a runtime
// cache beside it and is not counted as model size (quantized_size reports it apart).
// Inference only: a quantised Linear in training mode, or fed an input that requires grad, throws.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "nabla/nn/linear.h"
#include "nabla/nn/multihead_attention.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/linear.h"

namespace nabla::nn {

// The quantisation of one activation tensor: q = clamp(round(x / scale) + zero_point, 0, qmax).
struct ActivationQuantization {
  float scale = 1.0f;
  int32_t zero_point = 0;
  int32_t qmax = 255;
};
// PyTorch's choose_qparams for quint8 over [min(lo, 0), max(hi, 0)] (qmax 127 with reduce_range).
ActivationQuantization choose_activation_quantization(float lo, float hi, bool reduce_range);
// The two passes of quantising n activations, vectorised for the machine profile's SIMD row
// (core/machine.h) and split over threads; every row gives the same bits.
// The range: {min, max} of x, both NaN when x holds a NaN ({+inf, -inf} for n = 0).
std::pair<float, float> activation_range(const float* x, int64_t n);
// out[i] = clamp(round_half_even(x[i] * (1 / q.scale)) + q.zero_point, 0, q.qmax); x finite.
void quantize_activations(const float* x, int64_t n, const ActivationQuantization& q, uint8_t* out);
// True on CPUs without VNNI (AVX-512 VNNI, AVX-VNNI or AMX), where 8-bit activations can
// saturate oneDNN's int8 products: there activations use 7 bits.
bool default_reduce_range();

struct QuantizeOptions {
  std::optional<bool> reduce_range;  // unset: default_reduce_range()
};

// An int8 copy of one float32 Linear, made by quantize_dynamic (or directly) and run by
// Linear::forward once installed with Linear::set_quantized.
class QuantizedLinear {
 public:
  // Quantises linear's weight now. Throws when oneDNN is missing or the weight is not float32.
  explicit QuantizedLinear(const Linear& linear, const QuantizeOptions& options = {});
  // The same for a raw (out, in) float32 weight and its bias (undefined: none), e.g. a row block
  // of MultiheadAttention's in_proj_weight; `what` names it in errors.
  QuantizedLinear(const char* what, const Tensor& weight, const Tensor& bias,
                  const QuantizeOptions& options = {});

  // y = act(x W^T + b) with x (..., in) float32 -> (..., out) float32, through int8.
  Tensor forward(const Tensor& x, std::optional<LinearActivation> act = std::nullopt) const;
  // Linear::forward's path: checks that `linear` is in eval mode, that x needs no gradient and
  // that linear's weight has not changed since it was quantised, then runs forward.
  Tensor forward_for(const Linear& linear, const Tensor& x,
                     std::optional<LinearActivation> act = std::nullopt) const;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool reduce_range() const { return reduce_range_; }
  // The stored int8 weight, (out, in) row-major, unpadded: the model's quantised weight.
  const std::vector<int8_t>& weight_int8() const { return weight_int8_; }
  const std::vector<float>& weight_scales() const { return weight_.scales(); }
  // The runtime cache: the weight as the product reads it, packed once here
  // (ops/kernels/onednn.h).
  const onednn::PackedInt8Weights& packed_weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // the Linear's own bias tensor
  // Model size of the weight: out * in int8 bytes, and out float32 scales (the bias stays float32
  // and is shared with the float layer).
  int64_t weight_bytes() const { return static_cast<int64_t>(weight_int8_.size()); }
  int64_t scale_bytes() const { return out_features_ * static_cast<int64_t>(sizeof(float)); }
  // The packed runtime cache's bytes (with oneDNN's padding and column sums).
  int64_t cache_bytes() const { return weight_.packed_bytes(); }
  // True when `weight` is no longer the tensor (storage and version) quantised here.
  bool stale(const Tensor& weight) const;

 private:
  int64_t in_features_, out_features_;
  bool reduce_range_;
  std::vector<int8_t> weight_int8_;
  onednn::PackedInt8Weights weight_;
  Tensor bias_;
  const void* source_storage_;  // the Linear weight's storage and version when quantised
  uint64_t source_version_;
};

// MultiheadAttention's input projections in int8: the q, k and v row blocks of in_proj_weight
// (or q/k/v_proj_weight when kdim/vdim differ), each a QuantizedLinear with per-output-channel
// scales. A call quantises its input once and writes the blocks it asks for side by side, as the
// float path's one GEMM over the packed weight does. The attention's own products stay float32.
class QuantizedInProjection {
 public:
  explicit QuantizedInProjection(const MultiheadAttention& mha,
                                 const QuantizeOptions& options = {});
  // x (.., in) -> (.., count * I): blocks [first, first + count) (0 q, 1 k, 2 v); count > 1 only
  // for a packed weight. Checks eval mode, no grad and stale weights as forward_for does.
  Tensor forward_for(const MultiheadAttention& mha, const Tensor& x, int64_t first,
                     int64_t count) const;
  const QuantizedLinear& block(int64_t i) const { return blocks_.at(static_cast<size_t>(i)); }

 private:
  std::vector<QuantizedLinear> blocks_;  // q, k, v
};

// Makes every float32 Linear in `module`'s tree (module itself included; MultiheadAttention's
// out_proj too) and every float32 MultiheadAttention's input projections run through int8, and
// returns how many (Linears + MultiheadAttentions). Not quantised: float64 layers, Conv2d,
// Embedding, the RNNs, and every other op (attention scores, LayerNorm, softmax stay float32).
// The float weights stay in the module, so state_dict()/save still write the float model
// (quantise again after loading); a weight changed after quantising (load_state_dict, an
// optimizer step, to(), prune_heads) makes the next forward throw until quantize_dynamic runs
// again. Throws, changing nothing, without oneDNN.
int64_t quantize_dynamic(Module& module, const QuantizeOptions& options = {});
// Undoes quantize_dynamic: every Linear and MultiheadAttention in the tree runs in float again.
// Returns how many.
int64_t dequantize(Module& module);
// The quantised weights' model size against the float32 weights they replace (all in bytes):
// int8 values (out * in each, unpadded), their float32 scales, and the packed runtime caches
// (oneDNN's layout, not model size). The whole model: every parameter and buffer in float32, and
// with the quantised weights counted as int8 + scales.
struct QuantizedSize {
  int64_t int8_bytes = 0, scale_bytes = 0, float_bytes = 0, cache_bytes = 0;
  int64_t model_float_bytes = 0, model_quantized_bytes = 0;
};
QuantizedSize quantized_size(const Module& module);

}  // namespace nabla::nn
