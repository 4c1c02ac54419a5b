// batch_norm, group_norm, rms_norm. batch_norm and rms_norm are written with ops (their
// backward, double backward included, comes from the engine); group_norm normalises through
// layer_norm's fused kernels on a (N, G, C/G * spatial) view, with a composite twin for tests.
#include "nabla/ops/norms.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/layer_norm.h"
#include "nabla/ops/reduce.h"

namespace nabla {
namespace {

void check_floating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("{}: x must be float32 or float64, got {} {}", op,
                                 dtype_name(x.dtype()), shape_str(x.shape())));
}

// x must be (N, C, *).
void check_channels_first(const char* op, const Tensor& x) {
  check_floating(op, x);
  if (x.dim() < 2)
    throw ShapeError(fmt::format("{}: x must be (N, C, *) with at least 2 dims, got {}", op,
                                 shape_str(x.shape())));
}

// An optional per-channel tensor: undefined, or shape (C) in x's dtype.
void check_per_channel(const char* op, const Tensor& x, const Tensor& p, const char* what) {
  if (!p.defined()) return;
  if (p.dtype() != x.dtype())
    throw DTypeError(fmt::format("{}: {} has dtype {} but x is {}", op, what, dtype_name(p.dtype()),
                                 dtype_name(x.dtype())));
  if (p.shape() != Shape{x.shape()[1]})
    throw ShapeError(fmt::format("{}: {} {} must have shape {} for x {} with {} channels", op, what,
                                 shape_str(p.shape()), shape_str(Shape{x.shape()[1]}),
                                 shape_str(x.shape()), x.shape()[1]));
}

// (1, C, 1, ...) for x of rank d: a per-channel tensor broadcast against x.
Tensor as_channel_column(const Tensor& p, int64_t d) {
  Shape s(static_cast<size_t>(d), 1);
  s[1] = p.shape()[0];
  return p.reshape(s);
}

// Every dim of x but the channel dim 1.
std::vector<int64_t> non_channel_dims(int64_t d) {
  std::vector<int64_t> dims{0};
  for (int64_t i = 2; i < d; ++i) dims.push_back(i);
  return dims;
}

Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias, int64_t d) {
  if (weight.defined()) y = mul(y, as_channel_column(weight, d));
  if (bias.defined()) y = add(y, as_channel_column(bias, d));
  return y;
}

}  // namespace

// ----------------------------------------------------------------------------
// batch_norm  (Ioffe & Szegedy 2015; torch.nn.functional.batch_norm)
//   training:  mean, var over dims (0, 2, ...) (biased); y = (x - mean) / sqrt(var + eps)
//              running_mean = (1 - m) running_mean + m mean
//              running_var  = (1 - m) running_var + m var * n / (n - 1)   (n values per channel)
//   eval:      y = (x - running_mean) / sqrt(running_var + eps)
//   then       y = y * weight + bias (per channel). Backward: from the ops.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  inspect::OpScope op_scope("batch_norm", {&x, &weight, &bias});
  const char* op = "batch_norm";
  check_channels_first(op, x);
  check_per_channel(op, x, running_mean, "running_mean");
  check_per_channel(op, x, running_var, "running_var");
  check_per_channel(op, x, weight, "weight");
  check_per_channel(op, x, bias, "bias");
  if (running_mean.defined() != running_var.defined())
    throw ValueError("batch_norm: running_mean and running_var must both be given or both not");
  if (!(eps >= 0)) throw ValueError(fmt::format("batch_norm: eps must be >= 0, got {}", eps));
  const int64_t d = x.dim(), C = x.shape()[1];
  const int64_t per_channel = C == 0 ? 0 : x.numel() / C;
  if (!training) {
    if (!running_mean.defined())
      throw ValueError(fmt::format(
          "batch_norm: eval mode (training=false) needs running_mean and running_var, x {}",
          shape_str(x.shape())));
    Tensor rstd = pow(add(as_channel_column(running_var, d), eps), -0.5);
    return affine(mul(sub(x, as_channel_column(running_mean, d)), rstd), weight, bias, d);
  }
  if (per_channel == 1)
    throw ValueError(fmt::format(
        "batch_norm: expected more than 1 value per channel when training, got input size {}",
        shape_str(x.shape())));
  if (per_channel == 0) return affine(mul(x, 1.0), weight, bias, d);  // nothing to normalise
  const auto dims = non_channel_dims(d);
  Tensor mu = mean(x, dims, true);
  Tensor xc = sub(x, mu);
  Tensor var = mean(mul(xc, xc), dims, true);
  Tensor y = mul(xc, pow(add(var, eps), -0.5));
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    const auto n = static_cast<double>(per_channel);
    Tensor batch_mean = mu.detach().reshape({C}), batch_var = var.detach().reshape({C});
    Tensor rm = running_mean, rv = running_var;  // handles to the caller's buffers
    rm.copy_(add(mul(rm, 1 - momentum), mul(batch_mean, momentum)));
    rv.copy_(add(mul(rv, 1 - momentum), mul(batch_var, momentum * n / (n - 1))));
  }
  return affine(y, weight, bias, d);
}

// ----------------------------------------------------------------------------
// group_norm  (Wu & He 2018; torch.nn.functional.group_norm)
//   forward:   x (N, C, *) viewed as (N, G, C/G * spatial); each row normalised (biased
//              variance); y = y * weight + bias per channel
//   backward:  layer_norm's (LayerNormBackward) for the normalisation, the ops' for the affine
namespace {

void check_group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                      double eps) {
  const char* op = "group_norm";
  check_channels_first(op, x);
  const int64_t C = x.shape()[1];
  if (groups <= 0 || C % groups != 0)
    throw ValueError(fmt::format(
        "group_norm: the number of channels must be divisible by num_groups, got x {} ({} "
        "channels) and num_groups={}",
        shape_str(x.shape()), C, groups));
  check_per_channel(op, x, weight, "weight");
  check_per_channel(op, x, bias, "bias");
  if (!(eps >= 0)) throw ValueError(fmt::format("group_norm: eps must be >= 0, got {}", eps));
}

}  // namespace

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  inspect::OpScope op_scope("group_norm", {&x, &weight, &bias});
  check_group_norm(x, num_groups, weight, bias, eps);
  const int64_t N = x.shape()[0], C = x.shape()[1];
  const int64_t row = N * C == 0 ? 0 : x.numel() / (N * num_groups);
  if (row == 0) return affine(mul(x, 1.0), weight, bias, x.dim());  // nothing to normalise
  Tensor rows = x.reshape({N, num_groups, row});
  Tensor y = layer_norm(rows, {row}, Tensor(), Tensor(), eps).reshape(x.shape());
  return affine(y, weight, bias, x.dim());
}

Tensor group_norm_composite(const Tensor& x, int64_t num_groups, const Tensor& weight,
                            const Tensor& bias, double eps) {
  inspect::OpScope op_scope("group_norm_composite", {&x, &weight, &bias});
  check_group_norm(x, num_groups, weight, bias, eps);
  const int64_t N = x.shape()[0];
  if (x.numel() == 0) return affine(mul(x, 1.0), weight, bias, x.dim());
  Tensor rows = x.reshape({N, num_groups, -1});
  Tensor xc = sub(rows, mean(rows, {2}, true));
  Tensor y = mul(xc, pow(add(mean(mul(xc, xc), {2}, true), eps), -0.5));
  return affine(y.reshape(x.shape()), weight, bias, x.dim());
}

// ----------------------------------------------------------------------------
// rms_norm  (Zhang & Sennrich 2019; torch.nn.functional.rms_norm)
//   forward:   y = x / sqrt(mean(x^2, last k dims) + eps) * weight
//   backward:  from the ops
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  inspect::OpScope op_scope("rms_norm", {&x, &weight});
  check_floating("rms_norm", x);
  const size_t k = normalized_shape.size();
  const bool ok = k >= 1 && k <= x.shape().size() &&
                  std::equal(normalized_shape.begin(), normalized_shape.end(),
                             x.shape().end() - static_cast<int64_t>(k));
  if (!ok)
    throw ShapeError(fmt::format(
        "rms_norm: normalized_shape {} must be non-empty and match the last dims of x {}",
        shape_str(normalized_shape), shape_str(x.shape())));
  if (weight.defined() && weight.dtype() != x.dtype())
    throw DTypeError(fmt::format("rms_norm: weight has dtype {} but x is {}",
                                 dtype_name(weight.dtype()), dtype_name(x.dtype())));
  if (weight.defined() && weight.shape() != normalized_shape)
    throw ShapeError(fmt::format("rms_norm: weight {} must have normalized_shape {}",
                                 shape_str(weight.shape()), shape_str(normalized_shape)));
  const double e = eps.value_or(x.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon()
                                                      : std::numeric_limits<double>::epsilon());
  if (!(e >= 0)) throw ValueError(fmt::format("rms_norm: eps must be >= 0, got {}", e));
  if (x.numel() == 0) return weight.defined() ? mul(x, weight) : mul(x, 1.0);
  std::vector<int64_t> dims;
  for (auto i = -static_cast<int64_t>(k); i < 0; ++i) dims.push_back(i);
  Tensor y = mul(x, pow(add(mean(mul(x, x), dims, true), e), -0.5));
  return weight.defined() ? mul(y, weight) : y;
}

}  // namespace nabla
