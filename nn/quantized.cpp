// Dynamic int8 quantisation of Linear (nn/quantized.h says what is quantised and how).
#include "nabla/nn/quantized.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nabla/core/allocator.h"
#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/linear_prepacked.h"

namespace nabla::nn {
namespace {

// The quantised activations' buffer, from nabla's caching allocator: a call reuses the block the
// last one freed, and nothing is zeroed first.
class ByteBuffer {
 public:
  explicit ByteBuffer(int64_t n) : n_(static_cast<size_t>(std::max<int64_t>(n, 1))) {
    data_ = static_cast<uint8_t*>(allocator::allocate(n_));
  }
  ~ByteBuffer() { allocator::deallocate(data_, n_); }
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  uint8_t* data() { return data_; }

 private:
  size_t n_;
  uint8_t* data_;
};

}  // namespace

QuantizedLinear::QuantizedLinear(const Linear& linear, const QuantizeOptions& options)
    : QuantizedLinear("QuantizedLinear", linear.weight(), linear.bias(), options) {}

QuantizedLinear::QuantizedLinear(const char* what, const Tensor& w, const Tensor& bias,
                                 const QuantizeOptions& options)
    : in_features_(w.dim() == 2 ? w.size(1) : 0),
      out_features_(w.dim() == 2 ? w.size(0) : 0),
      reduce_range_(options.reduce_range.value_or(default_reduce_range())),
      bias_(bias),
      source_storage_(w.storage().get()),
      source_version_(w.storage()->version()) {
  onednn::require(what);
  if (w.dtype() != kFloat32)
    throw DTypeError(
        fmt::format("{}: the weight must be float32, got {}", what, dtype_name(w.dtype())));
  if (w.dim() != 2)
    throw ShapeError(
        fmt::format("{}: the weight must be 2-D (out, in), got {}", what, shape_str(w.shape())));
  const std::vector<float> values = w.contiguous().to_vector<float>();
  weight_int8_.resize(values.size());
  std::vector<float> scales(out_features_);
  for (int64_t j = 0; j < out_features_; ++j) {
    const float* row = values.data() + j * in_features_;
    float max_abs = 0.0f;
    for (int64_t t = 0; t < in_features_; ++t) max_abs = std::max(max_abs, std::fabs(row[t]));
    if (!std::isfinite(max_abs))
      throw ValueError(fmt::format("{}: weight row {} holds a non-finite value", what, j));
    const float scale = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
    scales[j] = scale;
    for (int64_t t = 0; t < in_features_; ++t)
      weight_int8_[j * in_features_ + t] =
          static_cast<int8_t>(std::clamp(std::nearbyint(row[t] / scale), -127.0f, 127.0f));
  }
  weight_ =
      onednn::PackedInt8Weights(out_features_, in_features_, weight_int8_.data(), scales.data());
}

bool QuantizedLinear::stale(const Tensor& weight) const {
  return weight.storage().get() != source_storage_ ||
         weight.storage()->version() != source_version_;
}

namespace {

// x (.., in) through the int8 products of `parts` (one input width, one reduce_range), written
// side by side into (.., sum of their out_features): the input is quantised once for all.
Tensor int8_products(const char* what, const Tensor& x,
                     const std::vector<const QuantizedLinear*>& parts,
                     std::optional<LinearActivation> act) {
  const int64_t in = parts.front()->in_features();
  int64_t width = 0;
  for (const QuantizedLinear* part : parts) width += part->out_features();
  if (x.dim() < 1 || x.size(-1) != in)
    throw ShapeError(fmt::format("{}: input of shape {} does not end in in_features = {}", what,
                                 shape_str(x.shape()), in));
  if (x.dtype() != kFloat32)
    throw DTypeError(fmt::format("{}: input must be float32, got {}", what, dtype_name(x.dtype())));
  if (GradMode::enabled() && x.requires_grad())
    throw AutogradError(fmt::format(
        "{}: inference only, the input requires grad; run it under NoGradGuard or detach the "
        "input (nn::dequantize gives the float layer back for training)",
        what));
  Shape out_shape = x.shape();
  out_shape.back() = width;
  Tensor out = empty(out_shape, kFloat32);
  if (out.numel() == 0) return out;
  const int64_t m = out.numel() / width;
  const Tensor xc = x.detach().contiguous();
  const float* xp = xc.data_ptr<float>();
  const auto [lo, hi] =
      xc.numel() > 0 ? activation_range(xp, xc.numel()) : std::pair{0.0f, 0.0f};  // in = 0
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError(fmt::format(
        "{}: input of shape {} holds non-finite values (min {}, max {}); int8 quantisation "
        "needs finite inputs",
        what, shape_str(x.shape()), lo, hi));
  const ActivationQuantization q =
      choose_activation_quantization(lo, hi, parts.front()->reduce_range());
  ByteBuffer xq(xc.numel());
  quantize_activations(xp, xc.numel(), q, xq.data());
  int64_t column = 0;
  for (const QuantizedLinear* part : parts) {
    onednn::Int8Linear p;
    p.m = m, p.n = part->out_features(), p.k = in, p.ldx = in, p.ldc = width;
    p.x_scale = q.scale, p.x_zero_point = q.zero_point, p.activation = onednn_activation(act);
    const Tensor bias = part->bias().defined() ? part->bias().detach().contiguous() : Tensor();
    onednn::linear_u8s8(p, xq.data(), part->packed_weight(),
                        bias.defined() ? bias.data_ptr<float>() : nullptr,
                        out.data_ptr<float>() + column);
    column += part->out_features();
  }
  return out;
}

}  // namespace

Tensor QuantizedLinear::forward(const Tensor& x, std::optional<LinearActivation> act) const {
  return int8_products("QuantizedLinear", x, {this}, act);
}

Tensor QuantizedLinear::forward_for(const Linear& linear, const Tensor& x,
                                    std::optional<LinearActivation> act) const {
  if (linear.is_training())
    throw AutogradError(
        "Linear: quantised by quantize_dynamic, which is inference only, but the module is in "
        "training mode; call eval(), or nn::dequantize to train in float");
  if (stale(linear.weight()))
    throw ValueError(
        "Linear: the weight changed after quantize_dynamic (load_state_dict, an optimizer step or "
        "to()), so its int8 copy is stale; call nn::quantize_dynamic again");
  return forward(x, act);
}

namespace {

// The q, k, v weights of `mha` and their biases (row blocks of the packed ones).
std::vector<std::pair<Tensor, Tensor>> in_projection_blocks(const MultiheadAttention& mha) {
  const Tensor& b = mha.in_proj_bias();
  std::vector<std::pair<Tensor, Tensor>> blocks;
  const int64_t rows =
      mha.packed() ? mha.in_proj_weight().size(0) / 3 : mha.q_proj_weight().size(0);
  for (int64_t i = 0; i < 3; ++i) {
    const Tensor bias = b.defined() ? b.narrow(0, i * rows, rows) : Tensor();
    const Tensor w = mha.packed() ? mha.in_proj_weight().narrow(0, i * rows, rows)
                     : i == 0     ? mha.q_proj_weight()
                     : i == 1     ? mha.k_proj_weight()
                                  : mha.v_proj_weight();
    blocks.emplace_back(w, bias);
  }
  return blocks;
}

}  // namespace

QuantizedInProjection::QuantizedInProjection(const MultiheadAttention& mha,
                                             const QuantizeOptions& options) {
  for (const auto& [w, b] : in_projection_blocks(mha))
    blocks_.emplace_back("MultiheadAttention (int8 input projection)", w, b, options);
}

Tensor QuantizedInProjection::forward_for(const MultiheadAttention& mha, const Tensor& x,
                                          int64_t first, int64_t count) const {
  constexpr const char* what = "MultiheadAttention (int8 input projection)";
  if (mha.is_training())
    throw AutogradError(fmt::format(
        "{}: quantised by quantize_dynamic, which is inference only, but the module is in "
        "training mode; call eval(), or nn::dequantize to train in float",
        what));
  const auto blocks = in_projection_blocks(mha);
  std::vector<const QuantizedLinear*> parts;
  for (int64_t i = first; i < first + count; ++i) {
    const QuantizedLinear& block = blocks_.at(static_cast<size_t>(i));
    if (block.stale(blocks[static_cast<size_t>(i)].first) ||
        block.out_features() != blocks[static_cast<size_t>(i)].first.size(0))
      throw ValueError(fmt::format(
          "{}: the weights changed after quantize_dynamic (load_state_dict, an optimizer step, "
          "to() or prune_heads), so the int8 copy is stale; call nn::quantize_dynamic again",
          what));
    parts.push_back(&block);
  }
  return int8_products(what, x, parts, std::nullopt);
}

int64_t quantize_dynamic(Module& module, const QuantizeOptions& options) {
  onednn::require("nn::quantize_dynamic");
  std::vector<Module*> all{&module};
  for (const auto& [name, child] : module.named_modules()) all.push_back(child.get());
  // Quantise every one first, then install: an error leaves the module as it was.
  std::vector<std::pair<Linear*, std::shared_ptr<const QuantizedLinear>>> linears;
  std::vector<std::pair<MultiheadAttention*, std::shared_ptr<const QuantizedInProjection>>> mhas;
  for (Module* m : all) {
    if (auto* l = dynamic_cast<Linear*>(m)) {
      const bool quantise = l->weight().dtype() == kFloat32;
      linears.emplace_back(l, quantise ? std::make_shared<const QuantizedLinear>(*l, options)
                                       : nullptr);  // e.g. after to(kFloat64): float again
    }
    if (auto* a = dynamic_cast<MultiheadAttention*>(m)) {
      const bool quantise = a->out_proj()->weight().dtype() == kFloat32;
      mhas.emplace_back(
          a, quantise ? std::make_shared<const QuantizedInProjection>(*a, options) : nullptr);
    }
  }
  int64_t count = 0;
  for (auto& [l, q] : linears) {
    count += q != nullptr;
    l->set_quantized(std::move(q));
  }
  for (auto& [a, q] : mhas) {
    count += q != nullptr;
    a->set_quantized_in_proj(std::move(q));
  }
  return count;
}

int64_t dequantize(Module& module) {
  int64_t count = 0;
  auto undo = [&](Module& m) {
    if (auto* l = dynamic_cast<Linear*>(&m); l && l->quantized()) {
      l->set_quantized(nullptr);
      ++count;
    }
    if (auto* a = dynamic_cast<MultiheadAttention*>(&m); a && a->quantized_in_proj()) {
      a->set_quantized_in_proj(nullptr);
      ++count;
    }
  };
  undo(module);
  for (const auto& [name, child] : module.named_modules()) undo(*child);
  return count;
}

QuantizedSize quantized_size(const Module& module) {
  QuantizedSize size;
  auto add = [&](const QuantizedLinear& q) {
    size.int8_bytes += q.weight_bytes();
    size.scale_bytes += q.scale_bytes();
    size.float_bytes += q.weight_bytes() * static_cast<int64_t>(sizeof(float));
    size.cache_bytes += q.cache_bytes();
  };
  auto visit = [&](const Module& m) {
    if (auto* l = dynamic_cast<const Linear*>(&m); l && l->quantized()) add(*l->quantized());
    if (auto* a = dynamic_cast<const MultiheadAttention*>(&m); a && a->quantized_in_proj())
      for (int64_t i = 0; i < 3; ++i) add(a->quantized_in_proj()->block(i));
  };
  visit(module);
  for (const auto& [name, child] : module.named_modules()) visit(*child);
  for (const auto& [name, t] : module.named_parameters())
    size.model_float_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  for (const auto& [name, t] : module.named_buffers())
    size.model_float_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  size.model_quantized_bytes =
      size.model_float_bytes - size.float_bytes + size.int8_bytes + size.scale_bytes;
  return size;
}

}  // namespace nabla::nn
