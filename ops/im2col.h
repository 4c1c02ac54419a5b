// The sliding-window geometry shared by unfold/fold (ops/patches.h) and the convolutions
// (ops/conv.h), the im2col and col2im loops over it, and unfold/fold as recorded ops on a
// checked geometry. Internal to ops/: not included by nabla.h.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "nabla/core/tensor.h"

namespace nabla {

using Int2 = std::array<int64_t, 2>;

// A window sliding over images (B, C, H, W): kernel (kh, kw) with dilation (dh, dw), stride
// (sh, sw), zero padding (ph, pw) before and (ph_end, pw_end) after each spatial dim; it visits
// the OH x OW output grid. Tap (i, j) of output (oh, ow) reads pixel
// (oh*sh - ph + i*dh, ow*sw - pw + j*dw), 0 outside the image.
struct Window {
  int64_t B, C, H, W;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t ph, pw, ph_end, pw_end;
  int64_t OH, OW;
  int64_t rows() const { return C * kh * kw; }  // rows of the column matrix
  int64_t cols() const { return OH * OW; }      // its columns (L)
};

struct WindowSpec {
  Int2 kernel, stride, pad_begin, pad_end, dilation;
};

// "(a, b)", or "(b,)" for one spatial dim (conv1d's view of a (1, b) pair).
std::string int2_str(Int2 v, int spatial_dims = 2);

// Checks the spec (positive kernel, stride and dilation; non-negative padding; the dilated
// kernel within the padded image; sizes that int64 holds) and returns the geometry. Errors name
// `op`; with spatial_dims = 1 they quote only the second of each pair.
Window make_window(const char* op, int64_t B, int64_t C, Int2 image, const WindowSpec& spec,
                   int spatial_dims = 2);

// The outputs o in [0, out) whose input index o*stride + offset lies in [0, n): [lo, hi).
inline std::pair<int64_t, int64_t> valid_outputs(int64_t offset, int64_t stride, int64_t n,
                                                 int64_t out) {
  int64_t lo = offset >= 0 ? 0 : (-offset - 1) / stride + 1;
  int64_t hi = n - 1 - offset < 0 ? 0 : (n - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::max(lo, std::min(hi, out));
  return {lo, hi};
}

// Rows [r0, r1) of the column matrix of contiguous images x (planes of H x W): row
// r = (plane*kh + i)*kw + j holds tap (i, j) of plane r / (kh*kw) for every output position, so
// cols (B, C*kh*kw, OH*OW) of a whole batch are rows [0, B*C*kh*kw). The padding is written as 0;
// each row is whole runs of zeros and copies (contiguous for stride 1).
template <class T>
void im2col_rows(const T* x, T* cols, const Window& g, int64_t r0, int64_t r1) {
  const int64_t L = g.cols();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t j = r % g.kw, i = r / g.kw % g.kh, plane = r / (g.kh * g.kw);
    const T* image = x + plane * g.H * g.W;
    T* out = cols + r * L;
    const int64_t h_off = i * g.dh - g.ph, w_off = j * g.dw - g.pw;
    const auto [oh0, oh1] = valid_outputs(h_off, g.sh, g.H, g.OH);
    const auto [ow0, ow1] = valid_outputs(w_off, g.sw, g.W, g.OW);
    std::fill(out, out + oh0 * g.OW, T(0));
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t base = (oh * g.sh + h_off) * g.W + w_off;  // pixel of ow = 0 (may be < 0)
      T* o = out + oh * g.OW;
      std::fill(o, o + ow0, T(0));
      if (g.sw == 1) {
        std::copy(image + base + ow0, image + base + ow1, o + ow0);
      } else {
        for (int64_t ow = ow0; ow < ow1; ++ow) o[ow] = image[base + ow * g.sw];
      }
      std::fill(o + ow1, o + g.OW, T(0));
    }
    std::fill(out + oh1 * g.OW, out + L, T(0));
  }
}

// The adjoint: planes [p0, p1) of x (zeroed by the caller) += every column entry at the pixel
// it was read from. Only a plane's own kh*kw rows write to it, so planes can run in parallel.
template <class T>
void col2im_planes(const T* cols, T* x, const Window& g, int64_t p0, int64_t p1) {
  const int64_t L = g.cols();
  for (int64_t plane = p0; plane < p1; ++plane) {
    T* image = x + plane * g.H * g.W;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t h_off = i * g.dh - g.ph;
      const auto [oh0, oh1] = valid_outputs(h_off, g.sh, g.H, g.OH);
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t w_off = j * g.dw - g.pw;
        const auto [ow0, ow1] = valid_outputs(w_off, g.sw, g.W, g.OW);
        const T* in = cols + ((plane * g.kh + i) * g.kw + j) * L;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          const int64_t base = (oh * g.sh + h_off) * g.W + w_off;
          const T* src = in + oh * g.OW;
          if (g.sw == 1) {  // a contiguous run: vectorises
            T* dst = image + base + ow0;
            for (int64_t k = 0; k < ow1 - ow0; ++k) dst[k] += src[ow0 + k];
          } else {
            for (int64_t ow = ow0; ow < ow1; ++ow) image[base + ow * g.sw] += src[ow];
          }
        }
      }
    }
  }
}

// unfold and fold on a geometry from make_window, recorded (each is the other's backward, so
// both are differentiable to any order). x (B, C, H, W) <-> cols (B, C*kh*kw, OH*OW).
Tensor unfold_window(const Tensor& x, const Window& g);
Tensor fold_window(const Tensor& cols, const Window& g);

}  // namespace nabla
