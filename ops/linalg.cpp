// matmul. Transposed operands are passed to BLAS as transpose flags, never copied; only a
// layout BLAS cannot express (e.g. a slice with a step in both dims) is made contiguous first.
#include "nabla/ops/linalg.h"

#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/core/strided_loop.h"
#include "nabla/ops/autocast.h"
#include "nabla/ops/gemm.h"
#include "nabla/ops/reduced_float.h"

namespace nabla {
namespace {

// a (..., M, K) @ b (..., K, N) -> (batch..., M, N), no autograd.
Tensor matmul_kernel(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = blas::as_readable(a_in, true), b = blas::as_readable(b_in, true);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes("matmul", a_batch, b_batch);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor c = K == 0 ? zeros(out_shape, a.dtype()) : empty(out_shape, a.dtype());
  const int64_t nbatch = shape_numel(batch);
  if (K == 0 || M == 0 || N == 0 || nbatch == 0) return c;

  Shape a_bst =
      broadcast_strides(a_batch, Shape(a.strides().begin(), a.strides().end() - 2), batch);
  Shape b_bst =
      broadcast_strides(b_batch, Shape(b.strides().begin(), b.strides().end() - 2), batch);
  const blas::BlasView la = blas::BlasView::of(a), lb = blas::BlasView::of(b);
  const Shape batch_contig = contiguous_strides(batch);

  dispatch_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.data_ptr<T>();
    const T* bp = b.data_ptr<T>();
    T* cp = c.data_ptr<T>();
    auto run = [&](int64_t i) {
      int64_t ao = 0, bo = 0, rem = i;
      for (size_t d = 0; d < batch.size(); ++d) {
        int64_t idx = rem / batch_contig[d];
        rem %= batch_contig[d];
        ao += idx * a_bst[d];
        bo += idx * b_bst[d];
      }
      blas::gemm<T>(la.transposed, lb.transposed, M, N, K, T(1), ap + ao, la.ld, bp + bo, lb.ld,
                    T(0), cp + i * M * N, N);
    };
    // Many small products: one per thread with single-threaded BLAS (OpenBLAS runs serially
    // inside an OpenMP region). Large ones: one at a time with threaded BLAS.
    if (nbatch > 1 && M * N * K < (1 << 18)) {
      parallel_for(nbatch, M * N * K, [&](int64_t b0, int64_t e0) {
        for (int64_t i = b0; i < e0; ++i) run(i);
      });
    } else {
      for (int64_t i = 0; i < nbatch; ++i) run(i);
    }
  });
  return c;
}

}  // namespace

namespace {

// FLOPs of a @ b: 2 M N K for each product of the broadcast batch (a 1-D operand is one row or
// one column). Shapes as matmul checked them.
int64_t matmul_flops(const Shape& a, const Shape& b) {
  const size_t a_mat = std::min<size_t>(a.size(), 2), b_mat = std::min<size_t>(b.size(), 2);
  const int64_t M = a.size() >= 2 ? a[a.size() - 2] : 1, K = a.back();
  const int64_t N = b.size() >= 2 ? b.back() : 1;
  const Shape batch = broadcast_shapes("matmul", Shape(a.begin(), a.end() - a_mat),
                                       Shape(b.begin(), b.end() - b_mat));
  return 2 * shape_numel(batch) * M * N * K;
}

}  // namespace

// ----------------------------------------------------------------------------
// matmul (both operands at least 2-D)
//   forward:   y = a @ b                      a (..., M, K), b (..., K, N) -> (batch..., M, N)
//   backward:  grad_a = grad @ b^T, grad_b = a^T @ grad   (batch dims summed by the engine)
//              saves b if a needs grad, a if b needs grad
static Tensor matmul_nd(const Tensor& a, const Tensor& b);

struct MatmulBackward final : Node {
  SavedTensor a{this, "a"}, b{this, "b"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {needs_input_grad(0) ? matmul_nd(grad, b.get().mT()) : Tensor(),
            needs_input_grad(1) ? matmul_nd(a.get().mT(), grad) : Tensor()};
  }
  // Each gradient is one product as large as the forward's.
  int64_t backward_flops() const override {
    const int64_t products = int64_t{needs_input_grad(0)} + int64_t{needs_input_grad(1)};
    return products * matmul_flops(input_shapes[0], input_shapes[1]);
  }
  const char* name() const override { return "MatmulBackward"; }
};

static Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  Tensor y = matmul_kernel(a, b);
  if (auto node = make_node<MatmulBackward>({&a, &b})) {
    if (node->needs_input_grad(0)) node->b.save(b);
    if (node->needs_input_grad(1)) node->a.save(a);
    set_history(y, node);
  }
  return y;
}

// The batch dims (all but the last two; none for a 1-D or 2-D operand) broadcast like an
// elementwise op's. Checked here so that the error shows both full shapes.
static void check_batch_dims(const Tensor& a, const Tensor& b) {
  const Shape &sa = a.shape(), &sb = b.shape();
  const size_t na = sa.size() > 2 ? sa.size() - 2 : 0, nb = sb.size() > 2 ? sb.size() - 2 : 0;
  for (size_t i = 1; i <= std::min(na, nb); ++i) {
    const int64_t x = sa[na - i], y = sb[nb - i];
    if (x != y && x != 1 && y != 1)
      throw ShapeError(fmt::format(
          "matmul: the batch dims of {} and {} do not broadcast ({} vs {}, dim {} of each); the "
          "last two dims are the matrices (..., M, K) @ (..., K, N)",
          shape_str(sa), shape_str(sb), x, y, -static_cast<int64_t>(i) - 2));
  }
}

void detail::check_matmul_shapes(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError(fmt::format("matmul: both operands need at least 1 dim, got {} and {}",
                                 shape_str(a.shape()), shape_str(b.shape())));
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  if (ka != kb)
    throw ShapeError(fmt::format(
        "matmul: shapes {} and {} are not aligned: the last dim of the first ({}) must equal {} "
        "of the second ({})",
        shape_str(a.shape()), shape_str(b.shape()), ka, b.dim() == 1 ? "the size" : "dim -2", kb));
  check_batch_dims(a, b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::applies({&a, &b})) return autocast::matmul(a, b);  // bf16 products
  if (reduced::any(a, b))
    return reduced::in_float32(
        "matmul", [](const Tensor& a32, const Tensor& b32) { return matmul(a32, b32); }, a, b);
  inspect::OpScope op_scope("matmul", {&a, &b});
  if (a.dtype() != b.dtype())
    throw DTypeError(fmt::format("matmul: dtype mismatch, {} {} vs {} {}", dtype_name(a.dtype()),
                                 shape_str(a.shape()), dtype_name(b.dtype()),
                                 shape_str(b.shape())));
  // Checked here, not only in the kernel: an empty product never reaches it.
  dispatch_float(a.dtype(), "matmul", [](auto) {});
  detail::check_matmul_shapes(a, b);
  op_scope.count_flops([&] { return matmul_flops(a.shape(), b.shape()); });
  if (a.dim() == 1 && b.dim() == 1) return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (a.dim() == 1) return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
  return matmul_nd(a, b);
}

}  // namespace nabla
