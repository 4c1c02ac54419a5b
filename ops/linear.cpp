// linear. x's leading dims are flattened into M rows (a view when x's layout allows it) and the
// product is one GEMM; weight^T is a transposed view, which matmul hands to BLAS as a transpose
// flag, so neither the forward nor the backward copies weight.
#include "ops/linear.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/autograd.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/activation.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/gelu_math.h"
#include "ops/gemm.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace nabla {

// ----------------------------------------------------------------------------
// linear
//   forward:   y2d = x2d @ W^T + b       x2d (M, in), W (out, in), b (out) -> y2d (M, out)
//   backward:  grad_x2d = grad2d @ W,  grad_W = grad2d^T @ x2d,  grad_b = sum of grad2d's rows
//              saves W if x needs grad, x if W needs grad
struct LinearBackward final : Node {
  SavedTensor x{this}, weight{this};
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Shape& x_shape = input_shapes[0];
    const int64_t in = input_shapes[1][1], out = input_shapes[1][0];
    const int64_t M = shape_numel(Shape(x_shape.begin(), x_shape.end() - 1));
    Tensor grad2d = grad.reshape({M, out});
    Tensor grad_x, grad_w, grad_b;
    if (needs_input_grad(0)) grad_x = matmul(grad2d, weight.get()).reshape(x_shape);
    if (needs_input_grad(1)) grad_w = matmul(grad2d.t(), x.get().reshape({M, in}));
    if (needs_input_grad(2)) grad_b = sum(grad2d, {0});
    return {grad_x, grad_w, grad_b};
  }
  const char* name() const override { return "LinearBackward"; }
};

namespace {

// y (M, out) = x2d W^T + b as one GEMM: y starts as copies of b and the GEMM adds into it
// (beta = 1), so y is written twice instead of zeroed, written and then read again for the bias;
// each thread fills the block of rows its GEMM then adds into (blas::gemm_onto_bias).
Tensor linear_forward(const Tensor& x2d_in, const Tensor& weight_in, const Tensor& bias) {
  const int64_t M = x2d_in.size(0), in = x2d_in.size(1), out = weight_in.size(0);
  Tensor y = empty({M, out}, x2d_in.dtype());
  if (y.numel() == 0) return y;
  // BLAS reads rows with unit stride; anything else is copied once.
  auto gemm_ready = [](const Tensor& t) {
    return (t.stride(1) == 1 || t.size(1) <= 1) && t.stride(0) >= std::max<int64_t>(t.size(1), 1)
               ? t
               : t.contiguous();
  };
  Tensor x2d = gemm_ready(x2d_in), w = gemm_ready(weight_in);
  dispatch_float(y.dtype(), "linear", [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    if (bias.defined()) {
      Tensor b = bias.detach().contiguous();
      blas::gemm_onto_bias<T>(false, true, M, out, in, x2d.data_ptr<T>(), x2d.stride(0),
                              w.data_ptr<T>(), w.stride(0), b.data_ptr<T>(), yp, out);
    } else if (in == 0) {
      std::fill(yp, yp + M * out, T(0));
    } else {
      blas::gemm<T>(false, true, M, out, in, T(1), x2d.data_ptr<T>(), x2d.stride(0),
                    w.data_ptr<T>(), w.stride(0), T(0), yp, out);
    }
  });
  return y;
}

// Dtype and shape checks of linear and linear_activation; `who` names the op.
void check_linear(const char* who, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw DTypeError(fmt::format("{}: dtype mismatch, x {} weight {} bias {}", who,
                                 dtype_name(x.dtype()), dtype_name(weight.dtype()),
                                 bias.defined() ? dtype_name(bias.dtype()) : "none"));
  if (!is_floating(x.dtype()))
    throw DTypeError(
        fmt::format("{}: expects float32 or float64, got {}", who, dtype_name(x.dtype())));
  const bool bad_bias = bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0));
  if (x.dim() == 0 || weight.dim() != 2 || x.size(-1) != weight.size(1) || bad_bias)
    throw ShapeError(fmt::format(
        "{}: expected x (..., in), weight (out, in), bias (out,); got x {}, weight {}, bias {}",
        who, shape_str(x.shape()), shape_str(weight.shape()),
        bias.defined() ? shape_str(bias.shape()) : "none"));
}

// (..., in) -> (..., out): the output shape of x's leading dims and `out` features.
Shape output_shape(const Tensor& x, int64_t out) {
  Shape y_shape(x.shape().begin(), x.shape().end() - 1);
  y_shape.push_back(out);
  return y_shape;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear("linear", x, weight, bias);
  const int64_t in = weight.size(1), out = weight.size(0);
  const Shape y_shape = output_shape(x, out);
  const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor y = linear_forward(x.detach().reshape({M, in}), weight.detach(), bias);  // (M, out)
  y.impl().shape = y_shape;  // same elements in the same order: (M, out) -> (..., out)
  y.impl().strides = contiguous_strides(y_shape);
  if (auto node = make_node<LinearBackward>({&x, &weight, &bias})) {
    if (node->needs_input_grad(1)) node->x.save(x);
    if (node->needs_input_grad(0)) node->weight.save(weight);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// linear_activation
//   forward:   z = x2d @ W^T + b (the GEMM accumulates into bias rows), y = act(z) in one pass
//              (ReLU in place: z is not kept)
//   backward:  grad_z = grad * act'(z) and grad_b = sum of grad_z's rows in one pass over the
//              rows, then grad_x = grad_z @ W, grad_W = grad_z^T @ x2d (as linear's)
//              saves W and x as linear does, plus z (GELU) or y (ReLU: y > 0 iff z > 0)
namespace {

template <class T, LinearActivation A>
[[gnu::always_inline]] inline T activation_value(T z) {
  if constexpr (A == LinearActivation::ReLU) {
    return z > 0 ? z : T(0);
  } else {
    return gelu_math::gelu_value < A == LinearActivation::GELU ? GeluApproximate::None
                                                               : GeluApproximate::Tanh > (z);
  }
}

// d act / dz, from z (GELU) or from y = relu(z) (ReLU).
template <class T, LinearActivation A>
[[gnu::always_inline]] inline T activation_derivative(T saved) {
  if constexpr (A == LinearActivation::ReLU) {
    return saved > 0 ? T(1) : T(0);
  } else {
    return gelu_math::gelu_derivative < A == LinearActivation::GELU
               ? GeluApproximate::None
               : GeluApproximate::Tanh > (saved);
  }
}

// grad_z = g * act'(saved) for a contiguous (rows, cols) block, and grad_b = its column sums
// (in row order, in double, as sum() over rows adds them) when grad_b is not null. Each thread
// owns a block of columns and streams every row through it.
template <class T, LinearActivation A>
void activation_backward(const T* g, const T* saved, T* grad_z, T* grad_b, int64_t rows,
                         int64_t cols) {
  parallel_for(cols, rows * 8, [&](int64_t b, int64_t e) {
    constexpr int64_t kBlock = 256;
    double acc[kBlock];
    for (int64_t c0 = b; c0 < e; c0 += kBlock) {
      const int64_t n = std::min(kBlock, e - c0);
      std::fill(acc, acc + n, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const T* __restrict gr = g + r * cols + c0;
        const T* __restrict sr = saved + r * cols + c0;
        T* __restrict zr = grad_z + r * cols + c0;
        for (int64_t c = 0; c < n; ++c) zr[c] = gr[c] * activation_derivative<T, A>(sr[c]);
        if (grad_b) {
#pragma omp simd
          for (int64_t c = 0; c < n; ++c) acc[c] += static_cast<double>(zr[c]);
        }
      }
      if (grad_b)
        for (int64_t c = 0; c < n; ++c) grad_b[c0 + c] = static_cast<T>(acc[c]);
    }
  });
}

template <class F>
decltype(auto) dispatch_activation(LinearActivation act, F&& f) {
  switch (act) {
    case LinearActivation::ReLU:
      return f(std::integral_constant<LinearActivation, LinearActivation::ReLU>{});
    case LinearActivation::GELU:
      return f(std::integral_constant<LinearActivation, LinearActivation::GELU>{});
    default:
      return f(std::integral_constant<LinearActivation, LinearActivation::GELUTanh>{});
  }
}

Tensor apply(LinearActivation act, const Tensor& z) {
  if (act == LinearActivation::ReLU) return relu(z);
  return gelu(z, act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh);
}

}  // namespace

struct LinearActivationBackward final : Node {
  SavedTensor x{this}, weight{this}, bias{this}, saved{this};  // saved: z (GELU) or y (ReLU)
  LinearActivation act;
  explicit LinearActivationBackward(LinearActivation a) : act(a) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Shape& x_shape = input_shapes[0];
    const int64_t in = input_shapes[1][1], out = input_shapes[1][0];
    const int64_t M = shape_numel(Shape(x_shape.begin(), x_shape.end() - 1));
    Tensor s = saved.get().reshape({M, out}), grad_z, grad_b;
    if (GradMode::enabled()) {  // create_graph: the same formulas with recorded ops
      // GELU's derivative depends on z, so z is recomputed with history for higher orders.
      Tensor g2d = grad.reshape({M, out});
      if (act == LinearActivation::ReLU) {
        grad_z = mul(g2d, gt(s, 0.0).to(g2d.dtype()));
      } else {
        Tensor z = linear(x.get(), weight.get(), bias.defined() ? bias.get() : Tensor());
        grad_z = gelu_backward(
            g2d, z.reshape({M, out}),
            act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh);
      }
      if (needs_input_grad(2)) grad_b = sum(grad_z, {0});
    } else {
      Tensor g2d = grad.contiguous().reshape({M, out});
      grad_z = empty({M, out}, g2d.dtype());
      if (needs_input_grad(2)) grad_b = empty({out}, g2d.dtype());
      dispatch_float(g2d.dtype(), "linear_activation", [&](auto tag) {
        using T = decltype(tag);
        dispatch_activation(act, [&](auto a) {
          activation_backward<T, decltype(a)::value>(
              g2d.data_ptr<T>(), s.data_ptr<T>(), grad_z.data_ptr<T>(),
              grad_b.defined() ? grad_b.data_ptr<T>() : nullptr, M, out);
        });
      });
    }
    Tensor grad_x, grad_w;
    if (needs_input_grad(0)) grad_x = matmul(grad_z, weight.get()).reshape(x_shape);
    if (needs_input_grad(1)) grad_w = matmul(grad_z.t(), x.get().reshape({M, in}));
    return {grad_x, grad_w, grad_b};
  }
  const char* name() const override { return "LinearActivationBackward"; }
};

Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         LinearActivation act) {
  check_linear("linear_activation", x, weight, bias);
  const int64_t in = weight.size(1), out = weight.size(0);
  const Shape y_shape = output_shape(x, out);
  const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor z = linear_forward(x.detach().reshape({M, in}), weight.detach(), bias);  // (M, out)
  const bool in_place = act == LinearActivation::ReLU;
  Tensor y = in_place ? z : empty({M, out}, z.dtype());
  dispatch_float(z.dtype(), "linear_activation", [&](auto tag) {
    using T = decltype(tag);
    const T* zp = z.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    dispatch_activation(act, [&](auto a) {
      parallel_for(M * out, in_place ? 1 : 8, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) yp[i] = activation_value<T, decltype(a)::value>(zp[i]);
      });
    });
  });
  y.impl().shape = y_shape;  // same elements in the same order: (M, out) -> (..., out)
  y.impl().strides = contiguous_strides(y_shape);
  if (auto node = make_node<LinearActivationBackward>({&x, &weight, &bias}, act)) {
    // GELU keeps x, W and b whatever needs grad: create_graph recomputes z from them.
    if (node->needs_input_grad(1) || !in_place) node->x.save(x);
    if (node->needs_input_grad(0) || !in_place) node->weight.save(weight);
    if (!in_place && bias.defined()) node->bias.save(bias);
    if (in_place) {
      node->saved.save(y, /*is_output=*/true);
    } else {
      node->saved.save(z);
    }
    set_history(y, node);
  }
  return y;
}

Tensor linear_activation_composite(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   LinearActivation act) {
  return apply(act, linear(x, weight, bias));
}

}  // namespace nabla
