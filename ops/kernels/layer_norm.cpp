#include "nabla/ops/kernels/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "nabla/core/parallel.h"

namespace nabla::kernels {
namespace {

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

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                        int64_t N, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t M = mean.numel();
  double* mp = mean.data_ptr<double>();
  double* rp = rstd.data_ptr<double>();
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    const T* wp = weight.defined() ? weight.data_ptr<T>() : nullptr;
    const T* bp = bias.defined() ? bias.data_ptr<T>() : nullptr;
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
}

namespace {

// grad_x of one row: rstd (gy - mean(gy) - xhat mean(gy xhat)), gy = grad * w.
template <class T>
void backward_input_row(const T* xr, const T* gr, const T* wp, double mu, double rs, int64_t N,
                        T* gxr) {
  if constexpr (std::is_same_v<T, float>) {
    const Float32Row row = Float32Row::from_mean(mu, rs);
    // The loops are written twice so that no load is conditional (a `wp ? ... : ...` inside
    // made GCC gather w element by element).
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
    if (wp) {
      for (int64_t j = 0; j < N; ++j)
        gxr[j] = row.rstd * (gr[j] * wp[j] - a - row.centered(xr[j]) * row.rstd * c);
    } else {
      for (int64_t j = 0; j < N; ++j)
        gxr[j] = row.rstd * (gr[j] - a - row.centered(xr[j]) * row.rstd * c);
    }
  } else {
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
    if (wp) {
      for (int64_t j = 0; j < N; ++j)
        gxr[j] = static_cast<T>(
            rs * (double(gr[j]) * double(wp[j]) - a - (double(xr[j]) - mu) * rs * c));
    } else {
      for (int64_t j = 0; j < N; ++j)
        gxr[j] = static_cast<T>(rs * (double(gr[j]) - a - (double(xr[j]) - mu) * rs * c));
    }
  }
}

}  // namespace

// One pass over the rows: each block of layer_norm_param_block_rows(M) rows writes its grad_x rows
// while they are in L1 and sums its rows' parameter terms (double, row order) into a buffer of
// its own; the blocks' sums are then added in block order. Reading x and grad once instead of
// twice (grad_x, then the column sums) is what the 2048x512 bench measured (see the header).
void layer_norm_backward(const Tensor& x, const Tensor& grad, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, int64_t N, Tensor* grad_x,
                         std::vector<double>* grad_w, std::vector<double>* grad_b) {
  const int64_t M = mean.numel();
  const double* mp = mean.data_ptr<double>();
  const double* rp = rstd.data_ptr<double>();
  const bool params = grad_w != nullptr;
  const int64_t block = layer_norm_param_block_rows(M);
  const int64_t blocks = M == 0 ? 0 : (M + block - 1) / block;
  // Block b's weight sums at [2 b N, 2 b N + N), its bias sums right after.
  std::vector<double> partial(params ? static_cast<size_t>(2 * blocks * N) : 0, 0.0);
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    const T* gp = grad.data_ptr<T>();
    const T* wp = weight.defined() ? weight.data_ptr<T>() : nullptr;
    T* gxp = grad_x ? grad_x->data_ptr<T>() : nullptr;
    parallel_for(blocks, block * N * 8, [&](int64_t bs, int64_t be) {
      for (int64_t b = bs; b < be; ++b) {
        double* pw = params ? partial.data() + 2 * b * N : nullptr;
        double* pb = pw ? pw + N : nullptr;
        for (int64_t r = b * block; r < std::min(M, (b + 1) * block); ++r) {
          const T* xr = xp + r * N;
          const T* gr = gp + r * N;
          const double mu = mp[r], rs = rp[r];
          if (gxp) backward_input_row(xr, gr, wp, mu, rs, N, gxp + r * N);
          if (!pw) continue;
#pragma omp simd
          for (int64_t j = 0; j < N; ++j) {
            const double g = double(gr[j]);
            pw[j] += g * (double(xr[j]) - mu) * rs;
            pb[j] += g;
          }
        }
      }
    });
  });
  if (!params) return;
  grad_w->assign(static_cast<size_t>(N), 0.0);
  grad_b->assign(static_cast<size_t>(N), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < N; ++j) {
      (*grad_w)[static_cast<size_t>(j)] += partial[static_cast<size_t>(2 * b * N + j)];
      (*grad_b)[static_cast<size_t>(j)] += partial[static_cast<size_t>(2 * b * N + N + j)];
    }
}

}  // namespace nabla::kernels
