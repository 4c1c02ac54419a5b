// interpolate: resizing (N, C, H, W) images, torch.nn.functional.interpolate's "nearest" and
// "bilinear" modes.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

struct InterpolateOptions {
  Shape size{};                         // output (H, W), or one value for both; or:
  std::vector<double> scale_factor{};   // one factor or (fh, fw): output = floor(in * f)
  std::string mode = "nearest";         // "nearest" or "bilinear"
  std::optional<bool> align_corners{};  // bilinear only (default false), as torch
};

// x (N, C, H, W) float32/float64 resized to options.size or by options.scale_factor (exactly one
// of them). nearest: source index floor(dst * scale), scale = in / out or 1 / factor (torch's
// legacy "nearest"). bilinear: align_corners maps the corner pixels' centres onto each other
// (src = dst * (in - 1) / (out - 1)); otherwise src = (dst + 0.5) * scale - 0.5, clamped at 0.
// Differentiable in x.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace nabla
