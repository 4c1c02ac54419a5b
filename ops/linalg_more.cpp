// bmm, baddbmm, addmm, outer, cosine_similarity, normalize: composites of matmul and pointwise
// ops (their gradients, and gradients of gradients, come from the parts). Each checks its own
// shapes and dtypes first, so an error names the op the caller wrote.
#include "nabla/ops/linalg_more.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/statistics.h"
#include "nabla/ops/unary.h"

namespace nabla {
namespace {

void check_float_pair(const char* op, const Tensor& a, const Tensor& b) {
  for (const Tensor* t : {&a, &b})
    if (!is_floating(t->dtype()))
      throw DTypeError(fmt::format("{}: expected float32 or float64, got {} {}", op,
                                   dtype_name(t->dtype()), shape_str(t->shape())));
  if (a.dtype() != b.dtype())
    throw DTypeError(fmt::format("{}: dtype mismatch, {} {} vs {} {}", op, dtype_name(a.dtype()),
                                 shape_str(a.shape()), dtype_name(b.dtype()),
                                 shape_str(b.shape())));
}

// beta * input + alpha * product, input broadcast to product's shape (torch's addmm family).
Tensor add_scaled(const char* op, const Tensor& input, const Tensor& product, double beta,
                  double alpha) {
  check_float_pair(op, input, product);
  if (broadcast_shapes(op, input.shape(), product.shape()) != product.shape())
    throw ShapeError(
        fmt::format("{}: input of shape {} does not broadcast to the product's shape {}", op,
                    shape_str(input.shape()), shape_str(product.shape())));
  const Tensor scaled = alpha == 1.0 ? product : mul(product, alpha);
  if (beta == 0.0) return scaled;  // input ignored, NaN included
  return add(beta == 1.0 ? input : mul(input, beta), scaled);
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("bmm", {&a, &b});
  check_float_pair("bmm", a, b);
  if (a.dim() != 3 || b.dim() != 3 || a.size(0) != b.size(0) || a.size(2) != b.size(1))
    throw ShapeError(
        fmt::format("bmm: expects (B, N, M) and (B, M, P) with the same B and M, got {} and {}",
                    shape_str(a.shape()), shape_str(b.shape())));
  return matmul(a, b);
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta, double alpha) {
  inspect::OpScope op_scope("baddbmm", {&input, &b1, &b2});
  check_float_pair("baddbmm", b1, b2);
  if (b1.dim() != 3 || b2.dim() != 3 || b1.size(0) != b2.size(0) || b1.size(2) != b2.size(1))
    throw ShapeError(fmt::format(
        "baddbmm: expects batch1 (B, N, M) and batch2 (B, M, P) with the same B and M, got {} "
        "and {}",
        shape_str(b1.shape()), shape_str(b2.shape())));
  return add_scaled("baddbmm", input, matmul(b1, b2), beta, alpha);
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
  inspect::OpScope op_scope("addmm", {&input, &m1, &m2});
  check_float_pair("addmm", m1, m2);
  if (m1.dim() != 2 || m2.dim() != 2 || m1.size(1) != m2.size(0))
    throw ShapeError(fmt::format("addmm: expects mat1 (N, M) and mat2 (M, P), got {} and {}",
                                 shape_str(m1.shape()), shape_str(m2.shape())));
  return add_scaled("addmm", input, matmul(m1, m2), beta, alpha);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("outer", {&a, &b});
  for (const Tensor* t : {&a, &b})
    if (t->dtype() == kBool)
      throw DTypeError(
          fmt::format("outer: expected a numeric dtype, got bool {}", shape_str(t->shape())));
  if (a.dtype() != b.dtype())
    throw DTypeError(fmt::format("outer: dtype mismatch, {} {} vs {} {}", dtype_name(a.dtype()),
                                 shape_str(a.shape()), dtype_name(b.dtype()),
                                 shape_str(b.shape())));
  if (a.dim() != 1 || b.dim() != 1)
    throw ShapeError(fmt::format("outer: expects two 1-D tensors, got {} and {}",
                                 shape_str(a.shape()), shape_str(b.shape())));
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

// ----------------------------------------------------------------------------
// cosine_similarity (torch 1.13's formula, at::cosine_similarity)
//   y = sum(x1 * x2, dim) / sqrt(s1 * s2), s_i = max(sum(x_i^2, dim), eps^2)
//   The clamp changes the value only: s + (max(s, eps^2) - s) with the bracket detached, as torch
//   clamps the squared norms in place under no_grad.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  inspect::OpScope op_scope("cosine_similarity", {&x1, &x2});
  check_float_pair("cosine_similarity", x1, x2);
  const Shape shape = broadcast_shapes("cosine_similarity", x1.shape(), x2.shape());
  const int64_t d = normalize_dim("cosine_similarity", dim, shape);
  const Tensor a = x1.expand(shape), b = x2.expand(shape);
  auto clamped_squared_norm = [&](const Tensor& x) {
    const Tensor s = sum(mul(x, x), {d}, true);
    const Tensor sd = s.detach();
    return add(s, sub(clamp(sd, eps * eps, std::nullopt), sd));
  };
  const Tensor denom = rsqrt(mul(clamped_squared_norm(a), clamped_squared_norm(b)));
  return sum(mul(sum(mul(a, b), {d}, true), denom), {d});
}

// ----------------------------------------------------------------------------
// normalize
//   y = x / max(||x||_p, eps) along dim (keepdim), torch.nn.functional.normalize.
//   ||x||_p = (sum |x|^p)^(1/p); p = 2 and inf use norm(); a zero vector's norm is computed on a
//   placeholder 1 so its gradient is 0 (not 0 * inf = NaN), as torch's.
Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  inspect::OpScope op_scope("normalize", {&x});
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("normalize: expected float32 or float64, got {} {}",
                                 dtype_name(x.dtype()), shape_str(x.shape())));
  if (!(p > 0)) throw ValueError(fmt::format("normalize: p must be positive (or inf), got {}", p));
  const int64_t d = normalize_dim("normalize", dim, x.shape());
  Tensor n;
  if (p == 2.0 || std::isinf(p)) {
    n = norm(x, p, {d}, true);
  } else if (p == 1.0) {
    n = sum(abs(x), {d}, true);
  } else {
    const Tensor s = sum(pow(abs(x), p), {d}, true);
    const Tensor is_zero = eq(s.detach(), 0.0);
    n = where(is_zero, 0.0, pow(where(is_zero, 1.0, s), 1.0 / p));
  }
  return div(x, clamp(n, eps, std::nullopt));
}

}  // namespace nabla
