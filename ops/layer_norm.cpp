// layer_norm. x (..., *normalized_shape) is viewed as M rows of N normalised elements. Row
// statistics take two passes (the mean, then the squared deviations from it), so inputs with a
// large mean and a tiny spread (mean 1e4, std 1e-2) lose nothing; mean and rstd are saved in
// double for the backward. The section below holds the math, the plain reference kernels (one
// row at a time in double: the code to study, and the oracle of the tests), the backward node and
// the forward; the tuned kernels (ops/kernels/layer_norm.h: float32 in float SIMD lanes,
// per-thread column sums) run unless NABLA_KERNELS=reference (ops/kernels/kernels.h).
#include "nabla/ops/layer_norm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/layer_norm.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/reduced_float.h"

namespace nabla {
namespace {

void check_param(const Tensor& x, const Tensor& p, const Shape& ns, const char* what) {
  if (!p.defined()) return;
  if (p.dtype() != x.dtype())
    throw DTypeError(fmt::format("layer_norm: {} has dtype {} but x is {}", what,
                                 dtype_name(p.dtype()), dtype_name(x.dtype())));
  if (p.shape() != ns)
    throw ShapeError(fmt::format("layer_norm: {} {} must have normalized_shape {}", what,
                                 shape_str(p.shape()), shape_str(ns)));
}

// Validates the arguments; returns N, the number of normalised elements per row.
int64_t check_layer_norm(const Tensor& x, const Shape& ns, const Tensor& w, const Tensor& b,
                         double eps) {
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("layer_norm: x must be float32 or float64, got {} {}",
                                 dtype_name(x.dtype()), shape_str(x.shape())));
  const size_t k = ns.size();
  const bool ok = k >= 1 && k <= x.shape().size() &&
                  std::equal(ns.begin(), ns.end(), x.shape().end() - static_cast<int64_t>(k));
  if (!ok)
    throw ShapeError(fmt::format(
        "layer_norm: normalized_shape {} must be non-empty and match the last dims of x {}",
        shape_str(ns), shape_str(x.shape())));
  check_param(x, w, ns, "weight");
  check_param(x, b, ns, "bias");
  if (!(eps >= 0)) throw ValueError(fmt::format("layer_norm: eps must be >= 0, got {}", eps));
  return shape_numel(ns);
}

// The leading (not normalised) dims, and the normalised ones counted from the end.
std::vector<int64_t> leading_dims(int64_t nd, int64_t k) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < nd - k; ++i) d.push_back(i);
  return d;
}
std::vector<int64_t> trailing_dims(int64_t k) {
  std::vector<int64_t> d;
  for (int64_t i = -k; i < 0; ++i) d.push_back(i);
  return d;
}

// Sums over the leading dims (nothing to sum when there are none).
Tensor sum_leading(const Tensor& t, int64_t k) {
  auto dims = leading_dims(t.dim(), k);
  return dims.empty() ? t : sum(t, dims);
}

}  // namespace

// ----------------------------------------------------------------------------
// layer_norm
//   forward:   mean, rstd = 1 / sqrt(var + eps) per row; xhat = (x - mean) rstd;
//              y = xhat * w + b
//   backward:  gy = grad * w;  grad_x = rstd (gy - mean(gy) - xhat mean(gy xhat))   (row means)
//              grad_w = sum over rows of grad * xhat;  grad_b = sum over rows of grad
//              saves x, weight, and mean and rstd (float64, one per row): xhat is recomputed
//              from them (x is the input, so saving it costs no memory; xhat would be new)
namespace {

void layer_norm_reference(const Tensor& x, const Tensor& w, const Tensor& b, double eps, int64_t N,
                          Tensor& y, Tensor& mean, Tensor& rstd) {
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* wp = w.defined() ? w.data_ptr<T>() : nullptr;
    const T* bp = b.defined() ? b.data_ptr<T>() : nullptr;
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    double *mp = mean.data_ptr<double>(), *rp = rstd.data_ptr<double>();
    for (int64_t r = 0; r < mean.numel(); ++r) {
      const T* xr = xp + r * N;
      T* yr = yp + r * N;
      double mu = 0, var = 0;
      for (int64_t j = 0; j < N; ++j) mu += double(xr[j]);
      mu /= double(N);
      for (int64_t j = 0; j < N; ++j) var += (double(xr[j]) - mu) * (double(xr[j]) - mu);
      const double rs = 1.0 / std::sqrt(var / double(N) + eps);
      for (int64_t j = 0; j < N; ++j) {
        double v = (double(xr[j]) - mu) * rs;  // xhat
        if (wp) v *= double(wp[j]);
        if (bp) v += double(bp[j]);
        yr[j] = static_cast<T>(v);
      }
      mp[r] = mu;
      rp[r] = rs;
    }
  });
}

void layer_norm_backward_input_reference(const Tensor& x, const Tensor& grad, const Tensor& w,
                                         const Tensor& mean, const Tensor& rstd, int64_t N,
                                         Tensor& grad_x) {
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* wp = w.defined() ? w.data_ptr<T>() : nullptr;
    const T *xp = x.data_ptr<T>(), *gp = grad.data_ptr<T>();
    T* gxp = grad_x.data_ptr<T>();
    const double *mp = mean.data_ptr<double>(), *rp = rstd.data_ptr<double>();
    for (int64_t r = 0; r < mean.numel(); ++r) {
      const T* xr = xp + r * N;
      const T* gr = gp + r * N;
      T* gxr = gxp + r * N;
      const double mu = mp[r], rs = rp[r];
      auto gy = [&](int64_t j) { return double(gr[j]) * (wp ? double(wp[j]) : 1.0); };
      auto xhat = [&](int64_t j) { return (double(xr[j]) - mu) * rs; };
      double a = 0, c = 0;  // mean(gy), mean(gy * xhat)
      for (int64_t j = 0; j < N; ++j) {
        a += gy(j);
        c += gy(j) * xhat(j);
      }
      a /= double(N);
      c /= double(N);
      for (int64_t j = 0; j < N; ++j) gxr[j] = static_cast<T>(rs * (gy(j) - a - xhat(j) * c));
    }
  });
}

void layer_norm_backward_params_reference(const Tensor& x, const Tensor& grad, const Tensor& mean,
                                          const Tensor& rstd, int64_t N, std::vector<double>& gw,
                                          std::vector<double>& gb) {
  gw.assign(static_cast<size_t>(N), 0.0);
  gb.assign(static_cast<size_t>(N), 0.0);
  // Rows are summed in blocks (in order), then the blocks' sums in order: the tuned kernel's
  // order, so the two agree to the bit.
  const int64_t M = mean.numel(), block = kernels::layer_norm_param_block_rows(M);
  std::vector<double> bw(gw.size()), bb(gb.size());
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T *xp = x.data_ptr<T>(), *gp = grad.data_ptr<T>();
    const double *mp = mean.data_ptr<double>(), *rp = rstd.data_ptr<double>();
    for (int64_t first = 0; first < M; first += block) {
      std::fill(bw.begin(), bw.end(), 0.0);
      std::fill(bb.begin(), bb.end(), 0.0);
      for (int64_t r = first; r < std::min(M, first + block); ++r) {
        const T* xr = xp + r * N;
        const T* gr = gp + r * N;
        const double mu = mp[r], rs = rp[r];
        for (int64_t j = 0; j < N; ++j) {
          const double g = double(gr[j]);
          bw[static_cast<size_t>(j)] += g * (double(xr[j]) - mu) * rs;  // grad * xhat
          bb[static_cast<size_t>(j)] += g;
        }
      }
      for (size_t j = 0; j < gw.size(); ++j) {
        gw[j] += bw[j];
        gb[j] += bb[j];
      }
    }
  });
}

// A column sum (double) as a tensor of shape ns in dtype dt.
Tensor column_tensor(const std::vector<double>& v, const Shape& ns, DType dt) {
  Tensor t = empty(ns, dt);
  dispatch_float(dt, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (size_t j = 0; j < v.size(); ++j) p[j] = static_cast<T>(v[j]);
  });
  return t;
}

}  // namespace

struct LayerNormBackward final : Node {
  SavedTensor x{this, "x"}, weight{this, "weight"}, mean{this, "mean"}, rstd{this, "rstd"};
  int64_t k;  // number of normalised dims
  double eps;
  LayerNormBackward(int64_t nk, double e) : k(nk), eps(e) {}

  // The same formulas with ops (recomputing the statistics), used when grad mode is on.
  std::vector<Tensor> recorded_backward(const Tensor& grad, const Tensor& xv, const Tensor& wv) {
    const auto dims = trailing_dims(k);
    Tensor xc = sub(xv, nabla::mean(xv, dims, true));
    Tensor rs = pow(add(nabla::mean(mul(xc, xc), dims, true), eps), -0.5);
    Tensor xhat = mul(xc, rs);
    Tensor grad_x;
    if (needs_input_grad(0)) {
      Tensor gy = wv.defined() ? mul(grad, wv) : grad;
      grad_x = mul(rs, sub(sub(gy, nabla::mean(gy, dims, true)),
                           mul(xhat, nabla::mean(mul(gy, xhat), dims, true))));
    }
    return {grad_x, needs_input_grad(1) ? sum_leading(mul(grad, xhat), k) : Tensor(),
            needs_input_grad(2) ? sum_leading(grad, k) : Tensor()};
  }

  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor xv = x.get(), wv = weight.get();
    if (GradMode::enabled()) return recorded_backward(grad, xv, wv);
    Tensor xc = xv.detach().contiguous(), gc = grad.contiguous();
    Tensor wc = wv.defined() ? wv.detach().contiguous() : Tensor();
    const Shape ns(xv.shape().end() - k, xv.shape().end());
    const int64_t N = shape_numel(ns);
    const Tensor mv = mean.get(), rv = rstd.get();
    const bool tuned = kernels::tuned_enabled();
    Tensor grad_x, grad_w, grad_b;
    if (needs_input_grad(0)) grad_x = empty(xv.shape(), xv.dtype());
    const bool params = needs_input_grad(1) || needs_input_grad(2);
    std::vector<double> gw, gb;
    if (tuned) {
      kernels::layer_norm_backward(xc, gc, wc, mv, rv, N, grad_x.defined() ? &grad_x : nullptr,
                                   params ? &gw : nullptr, params ? &gb : nullptr);
    } else {
      if (grad_x.defined()) layer_norm_backward_input_reference(xc, gc, wc, mv, rv, N, grad_x);
      if (params) layer_norm_backward_params_reference(xc, gc, mv, rv, N, gw, gb);
    }
    if (needs_input_grad(1)) grad_w = column_tensor(gw, ns, xv.dtype());
    if (needs_input_grad(2)) grad_b = column_tensor(gb, ns, xv.dtype());
    return {grad_x, grad_w, grad_b};
  }
  const char* name() const override { return "LayerNormBackward"; }
};

namespace {

// fvcore's estimate (fvcore/nn/jit_handles.py, norm_flop_counter): 5 FLOPs per element with an
// affine weight, 4 without.
int64_t layer_norm_flops(const Tensor& x, const Tensor& weight) {
  return x.numel() * (weight.defined() ? 5 : 4);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (reduced::any(x, weight, bias))
    return reduced::in_float32(
        "layer_norm",
        [&](const Tensor& x32, const Tensor& w32, const Tensor& b32) {
          return layer_norm(x32, normalized_shape, w32, b32, eps);
        },
        x, weight, bias);
  inspect::OpScope op_scope("layer_norm", {&x, &weight, &bias});
  const int64_t N = check_layer_norm(x, normalized_shape, weight, bias, eps);
  op_scope.count_flops([&] { return layer_norm_flops(x, weight); });
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  Tensor xc = x.detach().contiguous();
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = empty(x.shape(), x.dtype());
  Tensor mean = empty({M}, kFloat64), rstd = empty({M}, kFloat64);
  if (kernels::tuned_enabled()) {
    kernels::layer_norm_forward(xc, wc, bc, eps, N, y, mean, rstd);
  } else {
    layer_norm_reference(xc, wc, bc, eps, N, y, mean, rstd);
  }
  const auto k = static_cast<int64_t>(normalized_shape.size());
  if (auto node = make_node<LayerNormBackward>({&x, &weight, &bias}, k, eps)) {
    node->x.save(x);
    if (node->needs_input_grad(0)) node->weight.save(weight);
    node->mean.save(mean);
    node->rstd.save(rstd);
    set_history(y, node);
  }
  return y;
}

Tensor layer_norm_composite(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                            const Tensor& bias, double eps) {
  inspect::OpScope op_scope("layer_norm_composite", {&x, &weight, &bias});
  check_layer_norm(x, normalized_shape, weight, bias, eps);
  op_scope.count_flops([&] { return layer_norm_flops(x, weight); });
  const auto dims = trailing_dims(static_cast<int64_t>(normalized_shape.size()));
  Tensor xc = sub(x, mean(x, dims, true));
  Tensor y = mul(xc, pow(add(mean(mul(xc, xc), dims, true), eps), -0.5));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

}  // namespace nabla
