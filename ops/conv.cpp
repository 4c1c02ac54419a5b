// Convolutions: conv1d and conv2d (one op on a 4-D view: conv1d is the H = 1 case), their
// reference kernel (the sum over taps as a plain loop) and the composite twin over unfold and
// matmul. The tuned kernels (per-sample im2col + GEMM) are in ops/kernels/conv.*.
#include "nabla/ops/conv.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "nabla/core/autocast.h"
#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/autocast.h"
#include "nabla/ops/kernels/conv.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/reduce.h"

namespace nabla {
namespace {

// One call's arguments, checked and normalised to 2-D: x4 (B, C, H, W) and w4 (O, C/G, kh, kw)
// are views of the inputs (conv1d's with H = kh = 1; an unbatched input's with B = 1).
struct ConvCall {
  Tensor x4, w4;
  ConvGeometry g;
  int spatial = 2;
  bool batched = true;
};

std::string bias_str(const Tensor& bias) {
  return bias.defined() ? shape_str(bias.shape()) : std::string("none");
}

// Under autocast (autocast_call) the operands may mix float32 and bfloat16 (autocast::applies).
ConvCall prepare(const char* op, int spatial, const Tensor& x, const Tensor& weight,
                 const Tensor& bias, Int2 stride, const std::string& mode, Int2 padding,
                 Int2 dilation, int64_t groups, bool autocast_call = false) {
  const bool kernel_dtype = x.dtype() == kFloat32 || x.dtype() == kFloat64;
  if (!autocast_call && (!kernel_dtype || weight.dtype() != x.dtype() ||
                         (bias.defined() && bias.dtype() != x.dtype())))
    throw DTypeError(fmt::format(
        "{}: expects float32 or float64 input, weight and bias of one dtype (bfloat16 under "
        "autocast::Scope), got x {}, weight {}, bias {}",
        op, dtype_name(x.dtype()), dtype_name(weight.dtype()),
        bias.defined() ? dtype_name(bias.dtype()) : "none"));
  const int64_t rank = spatial + 2;
  if ((x.dim() != rank && x.dim() != rank - 1) || weight.dim() != rank)
    throw ShapeError(fmt::format("{}: expects x {} or {} and weight {}, got x {} and weight {}", op,
                                 spatial == 2 ? "(B, C, H, W)" : "(B, C, L)",
                                 spatial == 2 ? "(C, H, W)" : "(C, L)",
                                 spatial == 2 ? "(O, C/groups, kh, kw)" : "(O, C/groups, k)",
                                 shape_str(x.shape()), shape_str(weight.shape())));
  const bool batched = x.dim() == rank;
  const int64_t C = x.size(batched ? 1 : 0), O = weight.size(0);
  if (groups <= 0) throw ValueError(fmt::format("{}: groups must be positive, got {}", op, groups));
  int64_t channels = 0;
  if (O % groups != 0)
    throw ShapeError(
        fmt::format("{}: groups={} does not divide the {} output channels of weight {}", op, groups,
                    O, shape_str(weight.shape())));
  if (__builtin_mul_overflow(weight.size(1), groups, &channels) || channels != C)
    throw ShapeError(fmt::format(
        "{}: with groups={}, weight {} expects input {} to have {} * {} channels, but it has {}",
        op, groups, shape_str(weight.shape()), shape_str(x.shape()), weight.size(1), groups, C));
  if (bias.defined() && bias.shape() != Shape{O})
    throw ShapeError(fmt::format("{}: bias has shape {} but weight {} needs ({},)", op,
                                 bias_str(bias), shape_str(weight.shape()), O));

  ConvCall c;
  c.spatial = spatial;
  c.batched = batched;
  c.x4 = batched ? x : x.unsqueeze(0);
  c.w4 = weight;
  if (spatial == 1) {
    c.x4 = c.x4.unsqueeze(2);
    c.w4 = weight.unsqueeze(2);
  }
  const Int2 kernel{c.w4.size(2), c.w4.size(3)};
  Int2 pad_begin = padding, pad_end = padding;
  if (mode == "valid") {
    pad_begin = pad_end = {0, 0};
  } else if (mode == "same") {
    if (stride != Int2{1, 1})
      throw ValueError(fmt::format("{}: padding=\"same\" needs stride 1, got stride {}", op,
                                   int2_str(stride, spatial)));
    for (int d = 0; d < 2; ++d) {  // total dilation*(k-1), the odd one at the end (PyTorch)
      int64_t total = 0;
      if (dilation[d] <= 0 || kernel[d] <= 0 ||
          __builtin_mul_overflow(dilation[d], kernel[d] - 1, &total))
        throw ValueError(fmt::format("{}: padding=\"same\" with kernel {} and dilation {}", op,
                                     int2_str(kernel, spatial), int2_str(dilation, spatial)));
      pad_begin[d] = total / 2;
      pad_end[d] = total - total / 2;
    }
  } else if (!mode.empty()) {
    throw ValueError(
        fmt::format("{}: padding must be sizes, \"same\" or \"valid\", got \"{}\"", op, mode));
  }
  const Window w = make_window(op, c.x4.size(0), C, {c.x4.size(2), c.x4.size(3)},
                               {kernel, stride, pad_begin, pad_end, dilation}, spatial);
  c.g = ConvGeometry{w, O, groups};
  if (std::max({w.cols(), c.g.taps(), c.g.out_group()}) > INT_MAX)
    throw ValueError(fmt::format("{}: x {} and weight {} give a product past the BLAS int range",
                                 op, shape_str(x.shape()), shape_str(weight.shape())));
  return c;
}

// The output back in the caller's layout: (B, O, OL) for conv1d, no batch dim if x had none.
Tensor caller_layout(const ConvCall& c, Tensor y) {
  if (c.spatial == 1) y = y.squeeze(2);
  return c.batched ? y : y.squeeze(0);
}

// Calls f(xi, wi, yi) for every product x[xi] * w[wi] that adds into y[yi] (taps in the padding
// skipped); flat indices into contiguous x (B, C, H, W), w (O, C/G, kh, kw), y (B, O, OH, OW).
template <class F>
void for_each_tap(const ConvGeometry& g, F&& f) {
  const Window& s = g.win;
  const int64_t Cg = g.in_group(), Og = g.out_group();
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t plane = b * s.C + o / Og * Cg + c;
        for (int64_t i = 0; i < s.kh; ++i)
          for (int64_t j = 0; j < s.kw; ++j) {
            const int64_t wi = ((o * Cg + c) * s.kh + i) * s.kw + j;
            for (int64_t oh = 0; oh < s.OH; ++oh) {
              const int64_t h = oh * s.sh - s.ph + i * s.dh;
              if (h < 0 || h >= s.H) continue;
              for (int64_t ow = 0; ow < s.OW; ++ow) {
                const int64_t w = ow * s.sw - s.pw + j * s.dw;
                if (w < 0 || w >= s.W) continue;
                f((plane * s.H + h) * s.W + w, wi, ((b * g.O + o) * s.OH + oh) * s.OW + ow);
              }
            }
          }
      }
}

// Reference kernels: every sum in double, over contiguous tensors (shapes as the tuned ones').
template <class T>
std::vector<double> doubles(const Tensor& t) {
  const T* p = t.data_ptr<T>();
  return std::vector<double>(p, p + t.numel());
}

template <class T>
void store(const std::vector<double>& from, const Tensor& to) {
  std::transform(from.begin(), from.end(), to.data_ptr<T>(),
                 [](double v) { return static_cast<T>(v); });
}

void conv2d_forward_reference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Tensor& y, const ConvGeometry& g) {
  dispatch_float(x.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<double> xv = doubles<T>(x), wv = doubles<T>(weight);
    std::vector<double> acc(static_cast<size_t>(y.numel()), 0.0);
    const int64_t L = g.win.cols();
    if (bias.defined())
      for (size_t i = 0; i < acc.size(); ++i)
        acc[i] = static_cast<double>(bias.data_ptr<T>()[static_cast<int64_t>(i) / L % g.O]);
    for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
      acc[static_cast<size_t>(yi)] += xv[static_cast<size_t>(xi)] * wv[static_cast<size_t>(wi)];
    });
    store<T>(acc, y);
  });
}

void conv2d_backward_reference(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                               const Tensor& grad_x, const Tensor& grad_weight,
                               const Tensor& grad_bias, const ConvGeometry& g) {
  dispatch_float(grad_y.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<double> gy = doubles<T>(grad_y);
    const std::vector<double> xv = grad_weight.defined() ? doubles<T>(x) : std::vector<double>();
    const std::vector<double> wv = grad_x.defined() ? doubles<T>(weight) : std::vector<double>();
    std::vector<double> gx(grad_x.defined() ? static_cast<size_t>(grad_x.numel()) : 0, 0.0);
    std::vector<double> gw(grad_weight.defined() ? static_cast<size_t>(grad_weight.numel()) : 0);
    for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
      const double gyi = gy[static_cast<size_t>(yi)];
      if (!gx.empty()) gx[static_cast<size_t>(xi)] += gyi * wv[static_cast<size_t>(wi)];
      if (!gw.empty()) gw[static_cast<size_t>(wi)] += gyi * xv[static_cast<size_t>(xi)];
    });
    if (grad_x.defined()) store<T>(gx, grad_x);
    if (grad_weight.defined()) store<T>(gw, grad_weight);
    if (grad_bias.defined()) {
      std::vector<double> gb(static_cast<size_t>(g.O), 0.0);
      const int64_t L = g.win.cols();
      for (size_t i = 0; i < gy.size(); ++i)
        gb[static_cast<size_t>(static_cast<int64_t>(i) / L % g.O)] += gy[i];
      store<T>(gb, grad_bias);
    }
  });
}

}  // namespace

// ----------------------------------------------------------------------------
// conv1d / conv2d (on the 4-D views; conv1d has H = kh = 1)
//   forward:   y[b, o, oh, ow] = bias[o] + sum over the channels c of o's group g and the taps
//              (i, j) of w[o, c, i, j] * x[b, g*C/G + c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
//              (0 in the padding). In matrices: y_g = w_g (O/G, K_g) @ unfold(x)_g (K_g, L) + b
//   backward:  grad_x = fold(w_g^T @ grad_g)                each gradient back to the pixel read
//              grad_w_g = sum over b of grad_g @ unfold(x)_g^T
//              grad_bias = sum of grad over b, oh, ow
//              saves x if w needs grad, w if x needs grad
struct ConvBackward final : Node {
  SavedTensor x{this, "x"}, weight{this, "weight"};
  ConvGeometry g;
  const char* node_name;  // Conv1dBackward or Conv2dBackward
  ConvBackward(const ConvGeometry& geometry, const char* n) : g(geometry), node_name(n) {}

  std::vector<Tensor> backward(const Tensor& grad) override {
    if (GradMode::enabled()) return backward_with_ops(grad);  // create_graph
    const DType dt = grad.dtype();
    Tensor gx = needs_input_grad(0) ? empty(input_shapes[0], dt) : Tensor();
    Tensor gw = needs_input_grad(1) ? empty(input_shapes[1], dt) : Tensor();
    Tensor gb = needs_input_grad(2) ? empty({g.O}, dt) : Tensor();
    const Tensor gy = grad.contiguous();
    const Tensor xs = gw.defined() ? x.get().detach().contiguous() : Tensor();
    const Tensor ws = gx.defined() ? weight.get().detach().contiguous() : Tensor();
    if (kernels::tuned_enabled()) {
      kernels::conv2d_backward(gy, xs, ws, gx, gw, gb, g);
    } else {
      conv2d_backward_reference(gy, xs, ws, gx, gw, gb, g);
    }
    return {gx, gw, gb};
  }

  // The same formulas with recorded ops (unfold, matmul, fold, sum), differentiable again.
  std::vector<Tensor> backward_with_ops(const Tensor& grad) {
    const int64_t B = g.win.B, G = g.groups, Og = g.out_group(), Kg = g.taps(), L = g.win.cols();
    const Tensor gy = grad.reshape({B, G, Og, L});
    Tensor gx, gw, gb;
    if (needs_input_grad(0)) {
      const Tensor wg = weight.get().reshape({G, Og, Kg});
      gx = fold_window(matmul(wg.mT(), gy).reshape({B, G * Kg, L}), g.win);
    }
    if (needs_input_grad(1)) {
      const Tensor cols = unfold_window(x.get(), g.win).view({B, G, Kg, L});
      gw = sum(matmul(gy, cols.mT()), {0}).reshape(input_shapes[1]);
    }
    if (needs_input_grad(2)) gb = sum(grad, {0, 2, 3});
    return {gx, gw, gb};
  }

  int64_t backward_flops() const override {
    if (GradMode::enabled()) return 0;  // its ops count their own
    return (needs_input_grad(0) ? g.flops() : 0) + (needs_input_grad(1) ? g.flops() : 0);
  }
  const char* name() const override { return node_name; }
};

// ----------------------------------------------------------------------------
// conv1d / conv2d under autocast (core/autocast.h): per group g, y_g = w16_g @ im2col(x16)_g as a
// bf16 product with float32 accumulation and a float32 result (ops/autocast.h), + bias in float32.
//   backward:  G16 = bf16(grad);  grad_x = col2im(w16_g^T G16_g) (float32 accumulation);
//              grad_w_g = sum over b of G16_g im2col(x16)_g^T (the bias is a recorded add);
//              each in its input's dtype. Saves x16 if w needs grad (its columns are unfolded
//              again: kh*kw times x's bytes are never kept), w16 if x needs grad.
struct AutocastConvBackward final : Node {
  SavedTensor x16{this, "x"}, w16{this, "weight"};
  ConvGeometry g;
  const char* node_name;
  AutocastConvBackward(const ConvGeometry& geometry, const char* n) : g(geometry), node_name(n) {}

  std::vector<Tensor> backward(const Tensor& grad) override {
    if (GradMode::enabled())
      throw AutogradError(fmt::format(
          "{}: create_graph (a gradient of a gradient) is not supported through an autocast "
          "convolution; run that part outside autocast::Scope",
          node_name));
    const Window& w = g.win;
    const int64_t G = g.groups, Og = g.out_group(), Kg = g.taps(), L = w.cols();
    const Tensor g16 = grad.detach().to(kBFloat16).contiguous().view({w.B, G, Og, L});
    Tensor gx, gw;
    if (needs_input_grad(0)) {
      const Tensor cols =
          autocast::bf16_product_kernel(w16.get().view({G, Og, Kg}), true, g16, false);
      gx = zeros({w.B, w.C, w.H, w.W}, kFloat32);
      const float* cp = cols.data_ptr<float>();
      float* xp = gx.data_ptr<float>();
      parallel_for(w.B * w.C, w.H * w.W * w.kh * w.kw,
                   [&](int64_t p0, int64_t p1) { col2im_planes(cp, xp, w, p0, p1); });
      if (input_dtypes[0] != kFloat32) gx = gx.to(input_dtypes[0]);
    }
    if (needs_input_grad(1)) {
      const Tensor cols16 = unfold_bf16(x16.get(), w).view({w.B, G, Kg, L});
      gw = sum(autocast::bf16_product_kernel(g16, false, cols16, true), {0})
               .reshape(input_shapes[1]);
      if (input_dtypes[1] != kFloat32) gw = gw.to(input_dtypes[1]);
    }
    return {gx, gw};
  }

  // im2col of contiguous bfloat16 images: (B, C*kh*kw, OH*OW).
  static Tensor unfold_bf16(const Tensor& x16, const Window& w) {
    Tensor cols = empty({w.B, w.rows(), w.cols()}, kBFloat16);
    const bfloat16* xp = x16.data_ptr<bfloat16>();
    bfloat16* cp = cols.data_ptr<bfloat16>();
    parallel_for(w.B * w.rows(), w.cols(),
                 [&](int64_t r0, int64_t r1) { im2col_rows(xp, cp, w, r0, r1); });
    return cols;
  }

  int64_t backward_flops() const override {
    return (needs_input_grad(0) ? g.flops() : 0) + (needs_input_grad(1) ? g.flops() : 0);
  }
  const char* name() const override { return node_name; }
};

namespace {

Tensor run_autocast_convolution(const ConvCall& c, const Tensor& bias, const char* node_name) {
  const Window& w = c.g.win;
  const int64_t G = c.g.groups, Og = c.g.out_group(), Kg = c.g.taps();
  const Tensor x16 = c.x4.detach().to(kBFloat16).contiguous();
  const Tensor w16 = c.w4.detach().to(kBFloat16).contiguous();
  const Tensor cols16 = AutocastConvBackward::unfold_bf16(x16, w).view({w.B, G, Kg, w.cols()});
  Tensor y = autocast::bf16_product_kernel(w16.view({G, Og, Kg}), false, cols16, false)
                 .view({w.B, c.g.O, w.OH, w.OW});
  if (auto node = make_node<AutocastConvBackward>({&c.x4, &c.w4}, c.g, node_name)) {
    if (node->needs_input_grad(1)) node->x16.save(x16);
    if (node->needs_input_grad(0)) node->w16.save(w16);
    set_history(y, node);
  }
  if (bias.defined())
    y = add(y, (bias.dtype() == kFloat32 ? bias : bias.to(kFloat32)).view({c.g.O, 1, 1}));
  return caller_layout(c, y);
}

Tensor run_convolution(const ConvCall& c, const Tensor& bias, const char* node_name) {
  const Window& w = c.g.win;
  Tensor y = empty({w.B, c.g.O, w.OH, w.OW}, c.x4.dtype());
  {
    const Tensor xc = c.x4.detach().contiguous(), wc = c.w4.detach().contiguous();
    const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
    if (kernels::tuned_enabled()) {
      kernels::conv2d_forward(xc, wc, bc, y, c.g);
    } else {
      conv2d_forward_reference(xc, wc, bc, y, c.g);
    }
  }
  if (auto node = make_node<ConvBackward>({&c.x4, &c.w4, &bias}, c.g, node_name)) {
    if (node->needs_input_grad(1)) node->x.save(c.x4);
    if (node->needs_input_grad(0)) node->weight.save(c.w4);
    set_history(y, node);
  }
  return caller_layout(c, y);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
              ConvPadding<2> padding, Size2 dilation, int64_t groups) {
  inspect::OpScope op_scope("conv2d", {&x, &weight, &bias});
  const bool on_bf16 = autocast::applies({&x, &weight, &bias});  // products on bf16 operands
  const ConvCall c = prepare("conv2d", 2, x, weight, bias, stride.values, padding.mode,
                             padding.sizes, dilation.values, groups, on_bf16);
  op_scope.count_flops([&] { return c.g.flops(); });
  if (on_bf16) return run_autocast_convolution(c, bias, "AutocastConv2dBackward");
  return run_convolution(c, bias, "Conv2dBackward");
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              ConvPadding<1> padding, int64_t dilation, int64_t groups) {
  inspect::OpScope op_scope("conv1d", {&x, &weight, &bias});
  const bool on_bf16 = autocast::applies({&x, &weight, &bias});  // products on bf16 operands
  const ConvCall c = prepare("conv1d", 1, x, weight, bias, {1, stride}, padding.mode,
                             {0, padding.sizes[0]}, {1, dilation}, groups, on_bf16);
  op_scope.count_flops([&] { return c.g.flops(); });
  if (on_bf16) return run_autocast_convolution(c, bias, "AutocastConv1dBackward");
  return run_convolution(c, bias, "Conv1dBackward");
}

// ----------------------------------------------------------------------------
// conv2d_composite
//   forward:   y = (w.reshape(G, O/G, K_g) @ unfold(x).view(B, G, K_g, L)).view(B, O, OH, OW) + b
//   backward:  from matmul, unfold and add
Tensor conv2d_composite(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                        ConvPadding<2> padding, Size2 dilation, int64_t groups) {
  inspect::OpScope op_scope("conv2d_composite", {&x, &weight, &bias});
  const ConvCall c = prepare("conv2d_composite", 2, x, weight, bias, stride.values, padding.mode,
                             padding.sizes, dilation.values, groups);
  op_scope.count_flops([&] { return c.g.flops(); });
  const Window& w = c.g.win;
  const int64_t G = c.g.groups, Kg = c.g.taps();
  const Tensor cols = unfold_window(c.x4, w).view({w.B, G, Kg, w.cols()});
  Tensor y = matmul(c.w4.reshape({G, c.g.out_group(), Kg}), cols).view({w.B, c.g.O, w.OH, w.OW});
  if (bias.defined()) y = add(y, bias.view({c.g.O, 1, 1}));
  return caller_layout(c, y);
}

}  // namespace nabla
