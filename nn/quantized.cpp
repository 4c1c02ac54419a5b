// Dynamic int8 quantisation of Linear (nn/quantized.h says what is quantised and how).
#include "nabla/nn/quantized.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/kernels/onednn.h"

namespace nabla::nn {
namespace {

onednn::Activation to_onednn(std::optional<LinearActivation> act) {
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

// Min and max of n floats, over split_parts() blocks when the tensor is large.
std::pair<float, float> min_max(const float* x, int64_t n) {
  const int64_t parts = n * 2 >= parallel_grain() && !in_parallel_part() ? split_parts() : 1;
  std::vector<float> lo(parts, std::numeric_limits<float>::infinity()),
      hi(parts, -std::numeric_limits<float>::infinity());
  run_parts(parts, [&](int64_t p) {
    const int64_t b = n * p / parts, e = n * (p + 1) / parts;
    float l = lo[p], h = hi[p], nan = 0.0f;
    for (int64_t i = b; i < e; ++i)
      l = std::min(l, x[i]), h = std::max(h, x[i]), nan += x[i] * 0.0f;
    // min and max skip a NaN; x * 0 is NaN for a NaN (and an Inf) and 0 otherwise.
    lo[p] = l + nan, hi[p] = h + nan;
  });
  return {*std::min_element(lo.begin(), lo.end()), *std::max_element(hi.begin(), hi.end())};
}

}  // namespace

ActivationQuantization choose_activation_quantization(float lo, float hi, bool reduce_range) {
  ActivationQuantization q;
  q.qmax = reduce_range ? 127 : 255;
  lo = std::min(lo, 0.0f), hi = std::max(hi, 0.0f);  // 0 is exact, as padding needs
  q.scale = (hi - lo) / static_cast<float>(q.qmax);
  if (q.scale == 0.0f || std::isinf(1.0f / q.scale)) q.scale = 0.1f;  // choose_qparams' choice
  const float zp = std::nearbyint(-lo / q.scale);
  q.zero_point = static_cast<int32_t>(std::clamp(zp, 0.0f, static_cast<float>(q.qmax)));
  return q;
}

bool default_reduce_range() {
  static const bool reduce =
      !(__builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avxvnni"));
  return reduce;
}

QuantizedLinear::QuantizedLinear(const Linear& linear, const QuantizeOptions& options)
    : in_features_(linear.in_features()),
      out_features_(linear.out_features()),
      reduce_range_(options.reduce_range.value_or(default_reduce_range())),
      bias_(linear.bias()),
      source_storage_(linear.weight().storage().get()),
      source_version_(linear.weight().storage()->version()) {
  onednn::require("QuantizedLinear");
  const Tensor& w = linear.weight();
  if (w.dtype() != kFloat32)
    throw DTypeError(fmt::format("QuantizedLinear: the Linear's weight must be float32, got {}",
                                 dtype_name(w.dtype())));
  const std::vector<float> values = w.contiguous().to_vector<float>();
  weight_.resize(values.size());
  scales_.resize(out_features_);
  for (int64_t j = 0; j < out_features_; ++j) {
    const float* row = values.data() + j * in_features_;
    float max_abs = 0.0f;
    for (int64_t t = 0; t < in_features_; ++t) max_abs = std::max(max_abs, std::fabs(row[t]));
    if (!std::isfinite(max_abs))
      throw ValueError(fmt::format("QuantizedLinear: weight row {} holds a non-finite value", j));
    const float scale = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
    scales_[j] = scale;
    for (int64_t t = 0; t < in_features_; ++t)
      weight_[j * in_features_ + t] =
          static_cast<int8_t>(std::clamp(std::nearbyint(row[t] / scale), -127.0f, 127.0f));
  }
}

int64_t QuantizedLinear::weight_bytes() const {
  return static_cast<int64_t>(weight_.size() * sizeof(int8_t) + scales_.size() * sizeof(float));
}

Tensor QuantizedLinear::forward(const Tensor& x, std::optional<LinearActivation> act) const {
  if (x.dim() < 1 || x.size(-1) != in_features_)
    throw ShapeError(
        fmt::format("QuantizedLinear: input of shape {} does not end in in_features = {}",
                    shape_str(x.shape()), in_features_));
  if (x.dtype() != kFloat32)
    throw DTypeError(
        fmt::format("QuantizedLinear: input must be float32, got {}", dtype_name(x.dtype())));
  if (GradMode::enabled() && x.requires_grad())
    throw AutogradError(
        "QuantizedLinear: inference only, the input requires grad; run it under NoGradGuard or "
        "detach the input (nn::dequantize gives the float layer back for training)");
  Shape out_shape = x.shape();
  out_shape.back() = out_features_;
  Tensor out = empty(out_shape, kFloat32);
  if (out.numel() == 0) return out;
  const int64_t m = out.numel() / out_features_;
  const Tensor xc = x.detach().contiguous();
  const float* xp = xc.data_ptr<float>();
  const auto [lo, hi] = xc.numel() > 0 ? min_max(xp, xc.numel()) : std::pair{0.0f, 0.0f};
  if (!std::isfinite(lo) || !std::isfinite(hi))
    throw ValueError(fmt::format(
        "QuantizedLinear: input of shape {} holds non-finite values (min {}, max {}); int8 "
        "quantisation needs finite inputs",
        shape_str(x.shape()), lo, hi));
  const ActivationQuantization q = choose_activation_quantization(lo, hi, reduce_range_);
  std::vector<uint8_t> xq(xc.numel());
  const float inv_scale = 1.0f / q.scale, zp = static_cast<float>(q.zero_point),
              qmax = static_cast<float>(q.qmax);
  parallel_for(xc.numel(), 2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      xq[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(xp[i] * inv_scale) + zp, 0.0f, qmax));
  });
  onednn::Int8Linear p;
  p.m = m, p.n = out_features_, p.k = in_features_, p.ldx = in_features_, p.ldc = out_features_;
  p.x_scale = q.scale, p.x_zero_point = q.zero_point, p.activation = to_onednn(act);
  const Tensor bias = bias_.defined() ? bias_.detach().contiguous() : Tensor();
  onednn::linear_u8s8(p, xq.data(), weight_.data(), scales_.data(),
                      bias.defined() ? bias.data_ptr<float>() : nullptr, out.data_ptr<float>());
  return out;
}

Tensor QuantizedLinear::forward_for(const Linear& linear, const Tensor& x,
                                    std::optional<LinearActivation> act) const {
  if (linear.is_training())
    throw AutogradError(
        "Linear: quantised by quantize_dynamic, which is inference only, but the module is in "
        "training mode; call eval(), or nn::dequantize to train in float");
  if (linear.weight().storage().get() != source_storage_ ||
      linear.weight().storage()->version() != source_version_)
    throw ValueError(
        "Linear: the weight changed after quantize_dynamic (load_state_dict, an optimizer step or "
        "to()), so its int8 copy is stale; call nn::quantize_dynamic again");
  return forward(x, act);
}

int64_t quantize_dynamic(Module& module, const QuantizeOptions& options) {
  onednn::require("nn::quantize_dynamic");
  std::vector<Linear*> linears;
  if (auto* self = dynamic_cast<Linear*>(&module)) linears.push_back(self);
  for (const auto& [name, child] : module.named_modules())
    if (auto* l = dynamic_cast<Linear*>(child.get())) linears.push_back(l);
  // Quantise every one first, then install: an error leaves the module as it was.
  std::vector<std::pair<Linear*, std::shared_ptr<const QuantizedLinear>>> done;
  for (Linear* l : linears)
    if (l->weight().dtype() == kFloat32)
      done.emplace_back(l, std::make_shared<const QuantizedLinear>(*l, options));
  for (Linear* l : linears)
    if (l->weight().dtype() != kFloat32) l->set_quantized(nullptr);  // e.g. after to(kFloat64)
  for (auto& [l, q] : done) l->set_quantized(std::move(q));
  return static_cast<int64_t>(done.size());
}

int64_t dequantize(Module& module) {
  int64_t count = 0;
  auto undo = [&](Module& m) {
    if (auto* l = dynamic_cast<Linear*>(&m); l && l->quantized()) {
      l->set_quantized(nullptr);
      ++count;
    }
  };
  undo(module);
  for (const auto& [name, child] : module.named_modules()) undo(*child);
  return count;
}

QuantizedSize quantized_size(const Module& module) {
  QuantizedSize size;
  auto add = [&](const Module& m) {
    if (auto* l = dynamic_cast<const Linear*>(&m); l && l->quantized()) {
      size.int8_bytes += l->quantized()->weight_bytes();
      size.float_bytes += l->weight().numel() * static_cast<int64_t>(sizeof(float));
    }
  };
  add(module);
  for (const auto& [name, child] : module.named_modules()) add(*child);
  return size;
}

}  // namespace nabla::nn
