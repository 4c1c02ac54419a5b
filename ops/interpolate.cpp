// interpolate. Both modes are separable, one pass per spatial dim, written with differentiable
// ops (their backward, and gradients of gradients, come from those ops):
//   nearest:   index_select along H, then along W, with torch's source indices;
//   bilinear:  y = A_h @ x @ A_w^T, with A (out, in) holding each output's two weights
//              (1 - lambda at floor(src), lambda at the next pixel): the same sums as torch's
//              upsample_bilinear2d, in another order. Dense A costs out * in per row; fine for
//              the image sizes of the examples, a direct kernel is the faster route.
// The source coordinates follow aten/src/ATen/native/UpSample.h (area_pixel_compute_scale,
// area_pixel_compute_source_index, nearest_idx), in the dtype torch computes them in (float for
// float32 inputs, double for float64).
#include "nabla/ops/interpolate.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/linalg.h"

namespace nabla {
namespace {

// torch's compute_scales_value: 1 / factor when a factor was given, else in / out.
template <class T>
T scale_of(std::optional<double> factor, int64_t in, int64_t out) {
  return factor ? static_cast<T>(1.0 / *factor) : static_cast<T>(in) / static_cast<T>(out);
}

// Source index of each output position, nearest mode (torch's nearest_idx).
Tensor nearest_indices(int64_t in, int64_t out, std::optional<double> factor) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  const float scale = scale_of<float>(factor, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t src = o;
    if (out == 2 * in) {
      src = o >> 1;
    } else if (out != in) {
      src = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
    }
    idx[static_cast<size_t>(o)] = src;
  }
  return from_vector(idx, {out});
}

// The (out, in) bilinear weights along one dim, in dtype T.
template <class T>
Tensor linear_weights(int64_t in, int64_t out, bool align_corners, std::optional<double> factor) {
  std::vector<T> w(static_cast<size_t>(out * in), T(0));
  T scale;
  if (align_corners) {
    scale = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  } else {
    scale = scale_of<T>(factor, in, out);
  }
  for (int64_t o = 0; o < out; ++o) {
    T src =
        align_corners ? scale * static_cast<T>(o) : scale * (static_cast<T>(o) + T(0.5)) - T(0.5);
    if (src < T(0)) src = T(0);
    const auto i0 = static_cast<int64_t>(src);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    const T lambda = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
    w[static_cast<size_t>(o * in + i0)] += T(1) - lambda;
    w[static_cast<size_t>(o * in + i1)] += lambda;
  }
  return from_vector(w, {out, in});
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  inspect::OpScope op_scope("interpolate", {&x});
  const std::string& mode = options.mode;
  if (mode != "nearest" && mode != "bilinear")
    throw ValueError(
        fmt::format("interpolate: mode '{}' is not supported; use 'nearest' or "
                    "'bilinear'",
                    mode));
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("interpolate: expected float32 or float64, got {} {}",
                                 dtype_name(x.dtype()), shape_str(x.shape())));
  if (x.dim() != 4)
    throw ShapeError(fmt::format("interpolate: expects a 4-D input (N, C, H, W), got shape {}",
                                 shape_str(x.shape())));
  if (mode == "nearest" && options.align_corners)
    throw ValueError("interpolate: align_corners can only be set with mode 'bilinear'");
  const bool has_size = !options.size.empty(), has_factor = !options.scale_factor.empty();
  if (has_size == has_factor)
    throw ValueError(
        fmt::format("interpolate: give exactly one of size and scale_factor (got "
                    "size {} and {} scale factors), input of shape {}",
                    shape_str(options.size), options.scale_factor.size(), shape_str(x.shape())));
  if (options.size.size() > 2 || options.scale_factor.size() > 2)
    throw ShapeError(
        fmt::format("interpolate: size {} / {} scale factors for 2 spatial dims of "
                    "input of shape {}; give one value or two",
                    shape_str(options.size), options.scale_factor.size(), shape_str(x.shape())));
  Shape out(2);
  std::optional<double> factor[2];
  for (size_t i = 0; i < 2; ++i) {
    const int64_t in = x.size(2 + static_cast<int64_t>(i));
    if (has_size) {
      out[i] = options.size[options.size.size() == 1 ? 0 : i];
    } else {
      const double f = options.scale_factor[options.scale_factor.size() == 1 ? 0 : i];
      if (!(f > 0) || !std::isfinite(f))
        throw ValueError(fmt::format("interpolate: scale_factor must be positive, got {}", f));
      factor[i] = f;
      out[i] = static_cast<int64_t>(std::floor(static_cast<double>(in) * f));
    }
  }
  if (out[0] <= 0 || out[1] <= 0 || x.size(2) <= 0 || x.size(3) <= 0)
    throw ShapeError(
        fmt::format("interpolate: input of shape {} to output size ({}, {}): "
                    "every spatial size must be positive",
                    shape_str(x.shape()), out[0], out[1]));
  if (mode == "nearest") {
    const Tensor rows = index_select(x, 2, nearest_indices(x.size(2), out[0], factor[0]));
    return index_select(rows, 3, nearest_indices(x.size(3), out[1], factor[1]));
  }
  const bool align = options.align_corners.value_or(false);
  Tensor weights[2];
  for (size_t i = 0; i < 2; ++i) {
    const int64_t in = x.size(2 + static_cast<int64_t>(i));
    weights[i] = x.dtype() == kFloat32 ? linear_weights<float>(in, out[i], align, factor[i])
                                       : linear_weights<double>(in, out[i], align, factor[i]);
  }
  return matmul(matmul(weights[0], x), weights[1].t());
}

}  // namespace nabla
