// Nadaraya-Watson pooling, written with differentiable ops (sub, mul, softmax, sum).
#include "nabla/nn/attention_pooling.h"

#include <fmt/format.h>

#include "nabla/core/error.h"
#include "nabla/nn/init.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/softmax.h"

namespace nabla::nn {

// ----------------------------------------------------------------------------
// Gaussian-kernel attention pooling
//   weights[q, i] = softmax_i(-(w (x_q - x_i))^2 / 2),  out[q] = sum_i weights[q, i] y_i
PooledAttention gaussian_kernel_pool(const Tensor& queries, const Tensor& keys,
                                     const Tensor& values, const Tensor& scale, const char* who) {
  if (!is_floating(queries.dtype()) || keys.dtype() != queries.dtype() ||
      values.dtype() != queries.dtype() || (scale.defined() && scale.dtype() != queries.dtype()))
    throw DTypeError(
        fmt::format("{}: queries, keys, values{} must share one floating dtype, got {}, {}, {}{}",
                    who, scale.defined() ? " and w" : "", dtype_name(queries.dtype()),
                    dtype_name(keys.dtype()), dtype_name(values.dtype()),
                    scale.defined() ? std::string(", ") + dtype_name(scale.dtype()) : ""));
  const bool shared = keys.dim() == 1;  // one key set for every query
  const bool ok = queries.dim() == 1 && keys.shape() == values.shape() &&
                  (shared || (keys.dim() == 2 && keys.size(0) == queries.size(0)));
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: expected queries (Q,) with keys and values both (K,) or both (Q, K); got {}, {}, {}",
        who, shape_str(queries.shape()), shape_str(keys.shape()), shape_str(values.shape())));
  Tensor diff = sub(queries.unsqueeze(1), shared ? keys.unsqueeze(0) : keys);  // (Q, K)
  if (scale.defined()) diff = mul(diff, scale);
  Tensor weights = softmax(mul(mul(diff, diff), -0.5), -1);                     // (Q, K)
  Tensor out = sum(mul(weights, shared ? values.unsqueeze(0) : values), {-1});  // (Q,)
  return {out, weights};
}

Tensor NadarayaWatson::forward(const Tensor& queries, const Tensor& keys, const Tensor& values) {
  PooledAttention r = gaussian_kernel_pool(queries, keys, values, Tensor(), "NadarayaWatson");
  weights_ = r.weights.detach();
  return r.output;
}

NWKernelRegression::NWKernelRegression(DType dtype, Generator& gen) : Module("NWKernelRegression") {
  if (!is_floating(dtype))
    throw DTypeError(
        fmt::format("NWKernelRegression: dtype must be floating, got {}", dtype_name(dtype)));
  w_ = register_parameter("w", empty({1}, dtype));
  init::uniform_(w_, 0.0, 1.0, gen);
}

Tensor NWKernelRegression::forward(const Tensor& queries, const Tensor& keys,
                                   const Tensor& values) {
  PooledAttention r = gaussian_kernel_pool(queries, keys, values, w_, "NWKernelRegression");
  weights_ = r.weights.detach();
  return r.output;
}

}  // namespace nabla::nn
