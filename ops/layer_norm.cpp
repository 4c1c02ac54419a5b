// layer_norm. x (..., *normalized_shape) is viewed as (M rows, N normalised elements). Row
// statistics take two passes (the mean, then the squared deviations from it), so inputs with a
// large mean and a tiny spread (mean 1e4, std 1e-2) lose nothing; mean and rstd are saved in
// double for the backward. float64 sums in double; float32 in float across SIMD lanes, with the
// care described at Float32Row.
#include "ops/layer_norm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/arithmetic.h"
#include "ops/reduce.h"

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

// NOTE: float32 rows are summed in float (double sums would halve the vector width: layer_norm
// ran at 1.5x PyTorch's time). Accuracy is kept by two devices. The mean is summed from x minus
// the row's first element, differences that are exact when the row has a large mean and a small
// spread. And the mean is split into a float pair hi + lo, so d = (x - hi) - lo is x - mean to
// float precision even where float(mean) alone is off by more than the spread.
struct Float32Row {
  float hi, lo, rstd;
  // The deviation from the mean.
  [[gnu::always_inline]] float centered(float x) const { return (x - hi) - lo; }
  static Float32Row from_mean(double mean, double rstd) {
    const auto hi = static_cast<float>(mean);
    return {hi, static_cast<float>(mean - double(hi)), static_cast<float>(rstd)};
  }
};

// Mean and rstd of one float32 row of N > 0 elements.
Float32Row float32_row_stats(const float* xr, int64_t N, double eps, double& mean, double& rstd) {
  const float shift = xr[0];
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < N; ++j) s += xr[j] - shift;
  mean = double(shift) + double(s) / double(N);
  Float32Row row = Float32Row::from_mean(mean, 1.0);
  float v = 0;
#pragma omp simd reduction(+ : v)
  for (int64_t j = 0; j < N; ++j) {
    const float d = row.centered(xr[j]);
    v += d * d;
  }
  rstd = 1.0 / std::sqrt(double(v) / double(N) + eps);
  row.rstd = static_cast<float>(rstd);
  return row;
}

}  // namespace

// ----------------------------------------------------------------------------
// layer_norm
//   forward:   mean, rstd = 1 / sqrt(var + eps) per row; xhat = (x - mean) rstd;
//              y = xhat * w + b
//   backward:  gy = grad * w;  grad_x = rstd (gy - mean(gy) - xhat mean(gy xhat))   (row means)
//              grad_w = sum over rows of grad * xhat;  grad_b = sum over rows of grad
//              saves x, weight, and mean and rstd (float64, one per row)
struct LayerNormBackward final : Node {
  SavedTensor x{this}, weight{this}, mean{this}, rstd{this};
  int64_t k;  // number of normalised dims
  double eps;
  LayerNormBackward(int64_t nk, double e) : k(nk), eps(e) {}

  // The same formulas with ops (recomputing the statistics), used under create_graph.
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
    const int64_t N = shape_numel(Shape(xv.shape().end() - k, xv.shape().end()));
    const int64_t M = N == 0 ? 0 : xv.numel() / N;
    const double* mp = mean.get().data_ptr<double>();
    const double* rp = rstd.get().data_ptr<double>();
    Tensor grad_x = needs_input_grad(0) ? empty(xv.shape(), xv.dtype()) : Tensor();
    Tensor grad_w, grad_b;
    dispatch_float(xv.dtype(), "layer_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = xc.data_ptr<T>();
      const T* gp = gc.data_ptr<T>();
      const T* wp = wc.defined() ? wc.data_ptr<T>() : nullptr;
      if (grad_x.defined()) {
        T* gxp = grad_x.data_ptr<T>();
        parallel_for(M, N * 8, [&](int64_t s, int64_t e) {
          for (int64_t r = s; r < e; ++r) {
            const T* xr = xp + r * N;
            const T* gr = gp + r * N;
            if constexpr (std::is_same_v<T, float>) {
              const Float32Row row = Float32Row::from_mean(mp[r], rp[r]);
              // gy = grad * w; the loops are written twice so that no load is conditional
              // (a `wp ? ... : ...` inside made GCC gather w element by element).
              float a = 0, c = 0;  // sums of gy and gy * xhat
              if (wp) {
#pragma omp simd reduction(+ : a, c)
                for (int64_t j = 0; j < N; ++j) {
                  const float gy = gr[j] * wp[j];
                  a += gy;
                  c += gy * row.centered(xr[j]);
                }
              } else {
#pragma omp simd reduction(+ : a, c)
                for (int64_t j = 0; j < N; ++j) {
                  a += gr[j];
                  c += gr[j] * row.centered(xr[j]);
                }
              }
              a /= static_cast<float>(N);
              c *= row.rstd / static_cast<float>(N);
              float* gxr = gxp + r * N;
              if (wp) {
                for (int64_t j = 0; j < N; ++j)
                  gxr[j] = row.rstd * (gr[j] * wp[j] - a - row.centered(xr[j]) * row.rstd * c);
              } else {
                for (int64_t j = 0; j < N; ++j)
                  gxr[j] = row.rstd * (gr[j] - a - row.centered(xr[j]) * row.rstd * c);
              }
              continue;
            }
            const double mu = mp[r], rs = rp[r];
            double a = 0, c = 0;  // mean(gy), mean(gy * xhat)
            if (wp) {
#pragma omp simd reduction(+ : a, c)
              for (int64_t j = 0; j < N; ++j) {
                const double gy = double(gr[j]) * double(wp[j]);
                a += gy;
                c += gy * (double(xr[j]) - mu) * rs;
              }
            } else {
#pragma omp simd reduction(+ : a, c)
              for (int64_t j = 0; j < N; ++j) {
                a += double(gr[j]);
                c += double(gr[j]) * (double(xr[j]) - mu) * rs;
              }
            }
            a /= double(N);
            c /= double(N);
            T* gxr = gxp + r * N;
            if (wp) {
              for (int64_t j = 0; j < N; ++j)
                gxr[j] = static_cast<T>(
                    rs * (double(gr[j]) * double(wp[j]) - a - (double(xr[j]) - mu) * rs * c));
            } else {
              for (int64_t j = 0; j < N; ++j)
                gxr[j] = static_cast<T>(rs * (double(gr[j]) - a - (double(xr[j]) - mu) * rs * c));
            }
          }
        });
      }
      if (!needs_input_grad(1) && !needs_input_grad(2)) return;
      // Column sums over rows: each chunk of columns is owned by one thread, which sums it in a
      // buffer of its own. NOTE: summing straight into acc_w/acc_b, whose chunk boundaries need
      // not fall on a cache line, let two threads write one line once per row (vit_small's
      // LayerNorm backward took 3.5x longer whenever the heap placed the vectors so).
      std::vector<double> acc_w(static_cast<size_t>(N), 0.0), acc_b(static_cast<size_t>(N), 0.0);
      parallel_for(N, M * 4, [&](int64_t s, int64_t e) {
        std::vector<double> part_w(static_cast<size_t>(e - s), 0.0), part_b(part_w);
        for (int64_t r = 0; r < M; ++r) {
          const T* gr = gp + r * N + s;
          const T* xr = xp + r * N + s;
          const double mu = mp[r], rs = rp[r];
          for (int64_t j = 0; j < e - s; ++j) {
            const double g = double(gr[j]);
            part_w[static_cast<size_t>(j)] += g * (double(xr[j]) - mu) * rs;
            part_b[static_cast<size_t>(j)] += g;
          }
        }
        std::copy(part_w.begin(), part_w.end(), acc_w.begin() + s);
        std::copy(part_b.begin(), part_b.end(), acc_b.begin() + s);
      });
      const Shape ns(xv.shape().end() - k, xv.shape().end());
      auto to_tensor = [&](const std::vector<double>& v) {
        Tensor t = empty(ns, xv.dtype());
        T* p = t.data_ptr<T>();
        for (size_t j = 0; j < v.size(); ++j) p[j] = static_cast<T>(v[j]);
        return t;
      };
      if (needs_input_grad(1)) grad_w = to_tensor(acc_w);
      if (needs_input_grad(2)) grad_b = to_tensor(acc_b);
    });
    return {grad_x, grad_w, grad_b};
  }
  const char* name() const override { return "LayerNormBackward"; }
};

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const int64_t N = check_layer_norm(x, normalized_shape, weight, bias, eps);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  Tensor xc = x.detach().contiguous();
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = empty(x.shape(), x.dtype());
  Tensor mean = empty({M}, kFloat64), rstd = empty({M}, kFloat64);
  double* mp = mean.data_ptr<double>();
  double* rp = rstd.data_ptr<double>();
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    const T* wp = wc.defined() ? wc.data_ptr<T>() : nullptr;
    const T* bp = bc.defined() ? bc.data_ptr<T>() : nullptr;
    T* yp = y.data_ptr<T>();
    parallel_for(M, N * 8, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const T* xr = xp + r * N;
        if constexpr (std::is_same_v<T, float>) {
          const Float32Row row = float32_row_stats(xr, N, eps, mp[r], rp[r]);
          float* yr = yp + r * N;
          if (wp && bp) {
            for (int64_t j = 0; j < N; ++j) yr[j] = row.centered(xr[j]) * row.rstd * wp[j] + bp[j];
          } else {
            for (int64_t j = 0; j < N; ++j) {
              float v = row.centered(xr[j]) * row.rstd;
              if (wp) v *= wp[j];
              if (bp) v += bp[j];
              yr[j] = v;
            }
          }
          continue;
        }
        // `omp simd` reductions may sum across vector lanes (plain loops must keep their order).
        double mu = 0, var = 0;
#pragma omp simd reduction(+ : mu)
        for (int64_t j = 0; j < N; ++j) mu += double(xr[j]);
        mu /= double(N);
#pragma omp simd reduction(+ : var)
        for (int64_t j = 0; j < N; ++j) var += (double(xr[j]) - mu) * (double(xr[j]) - mu);
        const double rs = 1.0 / std::sqrt(var / double(N) + eps);
        mp[r] = mu;
        rp[r] = rs;
        T* yr = yp + r * N;
        if (wp && bp) {  // the usual case, one branch-free loop
          for (int64_t j = 0; j < N; ++j)
            yr[j] = static_cast<T>((double(xr[j]) - mu) * rs * double(wp[j]) + double(bp[j]));
        } else {
          for (int64_t j = 0; j < N; ++j) {
            double v = (double(xr[j]) - mu) * rs;
            if (wp) v *= double(wp[j]);
            if (bp) v += double(bp[j]);
            yr[j] = static_cast<T>(v);
          }
        }
      }
    });
  });
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
  check_layer_norm(x, normalized_shape, weight, bias, eps);
  const auto dims = trailing_dims(static_cast<int64_t>(normalized_shape.size()));
  Tensor xc = sub(x, mean(x, dims, true));
  Tensor y = mul(xc, pow(add(mean(mul(xc, xc), dims, true), eps), -0.5));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

}  // namespace nabla
