// Indexing ops. index_select/index_add and gather/scatter_add are adjoint pairs: each one's
// backward is the other, so gradients of gradients work. Index values are validated before any
// kernel runs; kernels that add into an output parallelise only over positions that cannot
// collide, so duplicate indices are summed deterministically.
#include "nabla/ops/indexing.h"

#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/copy.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/shape.h"

namespace nabla {
namespace {

// Columns handled per task when rows are added into an output (keeps tasks race-free).
constexpr int64_t kColumnBlock = 1024;

void check_index_dtype(const char* op, const Tensor& index) {
  if (index.dtype() != kInt64)
    throw DTypeError(fmt::format("{}: index must be int64, got {} (shape {})", op,
                                 dtype_name(index.dtype()), shape_str(index.shape())));
}

// The index values in row-major order, each checked to lie in [0, size).
std::vector<int64_t> checked_indices(const char* op, const Tensor& index, int64_t dim,
                                     int64_t size) {
  std::vector<int64_t> idx = index.to_vector<int64_t>();
  for (int64_t v : idx)
    if (v < 0 || v >= size)
      throw IndexError(
          fmt::format("{}: index {} is out of range for dim {} of size {}", op, v, dim, size));
  return idx;
}

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// For gather/scatter: positions of an index-shaped loop split as (outer, m, inner) around dim.
// An operand's element offset at (o, k, i) is outer_off[o] + k * dim_stride + inner_off[i].
struct IndexLoop {
  int64_t outer, m, inner;
  IndexLoop(const Shape& index_shape, size_t dim)
      : outer(prod(index_shape, 0, dim)),
        m(index_shape.empty() ? 1 : index_shape[dim]),
        inner(prod(index_shape, dim + 1, index_shape.size())),
        shape_(index_shape),
        dim_(dim) {}

  // Offsets of every outer (or inner) position for an operand with `strides`.
  std::vector<int64_t> offsets(const Shape& strides, bool outer_part) const {
    const size_t b = outer_part ? 0 : dim_ + 1, e = outer_part ? dim_ : shape_.size();
    std::vector<int64_t> off(static_cast<size_t>(outer_part ? outer : inner), 0);
    for (size_t p = 0; p < off.size(); ++p) {
      int64_t rem = static_cast<int64_t>(p);
      for (size_t d = e; d-- > b;) {
        off[p] += rem % shape_[d] * strides[d];
        rem /= shape_[d];
      }
    }
    return off;
  }

 private:
  Shape shape_;
  size_t dim_;
};

}  // namespace

// ----------------------------------------------------------------------------
// index_select
//   forward:   y[..., k, ...] = x[..., index[k], ...] along dim
//   backward:  grad_x = index_add(zeros(x.shape), dim, index, grad)      saves index
struct IndexSelectBackward final : Node {
  SavedTensor index{this, "index"};
  int64_t dim;
  Shape input_shape;
  IndexSelectBackward(int64_t d, Shape s) : dim(d), input_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {index_add(zeros(input_shape, grad.dtype()), dim, index.get(), grad)};
  }
  const char* name() const override { return "IndexSelectBackward"; }
};

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  inspect::OpScope op_scope("index_select", {&x, &index});
  check_index_dtype("index_select", index);
  if (x.dim() == 0) throw ShapeError("index_select: x is 0-d (shape ()); expects at least 1 dim");
  if (index.dim() > 1)
    throw ShapeError(fmt::format("index_select: index must be 0-d or 1-D, got shape {}",
                                 shape_str(index.shape())));
  const int64_t d = normalize_dim("index_select", dim, x.shape());
  const int64_t n = x.size(d);
  const std::vector<int64_t> idx = checked_indices("index_select", index, d, n);
  const int64_t m = static_cast<int64_t>(idx.size());

  Shape out = x.shape();
  out[static_cast<size_t>(d)] = m;
  Tensor y = empty(out, x.dtype());
  const Tensor xc = x.detach().contiguous();
  const int64_t outer = prod(x.shape(), 0, static_cast<size_t>(d));  // x is (outer, n, inner)
  const int64_t inner = prod(x.shape(), static_cast<size_t>(d) + 1, x.shape().size());
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(outer * m, inner, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* from = xp + (r / m * n + idx[static_cast<size_t>(r % m)]) * inner;
        std::copy(from, from + inner, yp + r * inner);
      }
    });
  });
  if (auto node = make_node<IndexSelectBackward>({&x}, d, x.shape())) {
    node->index.save(index);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// index_add
//   forward:   y = x;  y[..., index[k], ...] += src[..., k, ...] along dim
//   backward:  grad_x = grad,  grad_src = index_select(grad, dim, index)      saves index
struct IndexAddBackward final : Node {
  SavedTensor index{this, "index"};
  int64_t dim;
  explicit IndexAddBackward(int64_t d) : dim(d) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {grad, needs_input_grad(1) ? index_select(grad, dim, index.get()) : Tensor()};
  }
  const char* name() const override { return "IndexAddBackward"; }
};

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  inspect::OpScope op_scope("index_add", {&x, &index, &src});
  check_index_dtype("index_add", index);
  if (x.dtype() != src.dtype())
    throw DTypeError(fmt::format("index_add: x is {} but src is {}", dtype_name(x.dtype()),
                                 dtype_name(src.dtype())));
  if (x.dim() == 0) throw ShapeError("index_add: x is 0-d (shape ()); expects at least 1 dim");
  if (index.dim() > 1)
    throw ShapeError(
        fmt::format("index_add: index must be 0-d or 1-D, got shape {}", shape_str(index.shape())));
  const int64_t d = normalize_dim("index_add", dim, x.shape());
  Shape expected = x.shape();
  expected[static_cast<size_t>(d)] = index.numel();
  if (src.shape() != expected)
    throw ShapeError(
        fmt::format("index_add: src has shape {} but x {} with index {} along dim {} "
                    "needs {}",
                    shape_str(src.shape()), shape_str(x.shape()), shape_str(index.shape()), d,
                    shape_str(expected)));
  const int64_t n = x.size(d);
  const std::vector<int64_t> idx = checked_indices("index_add", index, d, n);
  const int64_t m = static_cast<int64_t>(idx.size());

  Tensor y = empty(x.shape(), x.dtype());
  copy_kernel(y, x);
  const Tensor sc = src.detach().contiguous();
  const int64_t outer = prod(x.shape(), 0, static_cast<size_t>(d));  // y is (outer, n, inner)
  const int64_t inner = prod(x.shape(), static_cast<size_t>(d) + 1, x.shape().size());
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  dispatch_numeric(x.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    const T* sp = sc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    // One task per (outer row, column block): tasks write disjoint parts of y.
    parallel_for(outer * blocks, m * std::min(inner, kColumnBlock), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / blocks, c0 = t % blocks * kColumnBlock;
        const int64_t c1 = std::min(inner, c0 + kColumnBlock);
        for (int64_t k = 0; k < m; ++k) {
          T* to = yp + (o * n + idx[static_cast<size_t>(k)]) * inner;
          const T* from = sp + (o * m + k) * inner;
          for (int64_t c = c0; c < c1; ++c) to[c] += from[c];
        }
      }
    });
  });
  if (auto node = make_node<IndexAddBackward>({&x, &src}, d)) {
    if (node->needs_input_grad(1)) node->index.save(index);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// gather / scatter_add share their checks: same rank for x, index (and src); index no larger
// than x off dim (and no larger than src anywhere).
static void check_gather_scatter(const char* op, const Tensor& x, int64_t d, const Tensor& index,
                                 const Tensor* src) {
  bool ok = index.dim() == x.dim() && (!src || src->dim() == x.dim());
  for (int64_t k = 0; ok && k < index.dim(); ++k)
    ok = (k == d || index.size(k) <= x.size(k)) && (!src || index.size(k) <= src->size(k));
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: index of shape {} must have the rank of x {}{}{} and be no larger than x{} in dims "
        "other than {}",
        op, shape_str(index.shape()), shape_str(x.shape()), src ? " and src " : "",
        src ? shape_str(src->shape()) : "", src ? " (and src in every dim)" : "", d));
}

// ----------------------------------------------------------------------------
// gather
//   forward:   y[i][j][k] = x[i][index[i][j][k]][k]  (dim = 1; any rank), y has index's shape
//   backward:  grad_x = scatter_add(zeros(x.shape), dim, index, grad)      saves index
struct GatherBackward final : Node {
  SavedTensor index{this, "index"};
  int64_t dim;
  Shape input_shape;
  GatherBackward(int64_t d, Shape s) : dim(d), input_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {scatter_add(zeros(input_shape, grad.dtype()), dim, index.get(), grad)};
  }
  const char* name() const override { return "GatherBackward"; }
};

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  inspect::OpScope op_scope("gather", {&x, &index});
  check_index_dtype("gather", index);
  const int64_t d = normalize_dim("gather", dim, x.shape());
  check_gather_scatter("gather", x, d, index, nullptr);
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  const std::vector<int64_t> idx = checked_indices("gather", index, d, n);

  Tensor y = empty(index.shape(), x.dtype());
  const IndexLoop loop(index.shape(), static_cast<size_t>(d));
  const std::vector<int64_t> x_outer = loop.offsets(x.strides(), true);
  const std::vector<int64_t> x_inner = loop.offsets(x.strides(), false);
  const int64_t x_step = x.dim() == 0 ? 0 : x.stride(d);
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    // idx and y are contiguous in index's shape: position (o, k, i) is (o * m + k) * inner + i.
    parallel_for(loop.outer * loop.m, loop.inner, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = x_outer[static_cast<size_t>(r / loop.m)];
        for (int64_t i = 0; i < loop.inner; ++i) {
          const int64_t p = r * loop.inner + i;
          yp[p] = xp[base + idx[static_cast<size_t>(p)] * x_step + x_inner[static_cast<size_t>(i)]];
        }
      }
    });
  });
  if (auto node = make_node<GatherBackward>({&x}, d, x.shape())) {
    node->index.save(index);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// scatter_add
//   forward:   y = x;  y[i][index[i][j][k]][k] += src[i][j][k]  (dim = 1; any rank)
//   backward:  grad_x = grad,  grad_src = gather(grad, dim, index), zero-padded to src's shape
//              where src is larger than index      saves index
struct ScatterAddBackward final : Node {
  SavedTensor index{this, "index"};
  int64_t dim;
  Shape src_shape;
  ScatterAddBackward(int64_t d, Shape s) : dim(d), src_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    if (!needs_input_grad(1)) return {grad, Tensor()};
    Tensor grad_src = gather(grad, dim, index.get());
    std::vector<int64_t> pads;  // F.pad order: last dim first
    for (size_t k = src_shape.size(); k-- > 0;)
      pads.insert(pads.end(), {0, src_shape[k] - grad_src.shape()[k]});
    if (grad_src.shape() != src_shape) grad_src = pad(grad_src, pads, 0.0);
    return {grad, grad_src};
  }
  const char* name() const override { return "ScatterAddBackward"; }
};

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  inspect::OpScope op_scope("scatter_add", {&x, &index, &src});
  check_index_dtype("scatter_add", index);
  if (x.dtype() != src.dtype())
    throw DTypeError(fmt::format("scatter_add: x is {} but src is {}", dtype_name(x.dtype()),
                                 dtype_name(src.dtype())));
  const int64_t d = normalize_dim("scatter_add", dim, x.shape());
  check_gather_scatter("scatter_add", x, d, index, &src);
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  const std::vector<int64_t> idx = checked_indices("scatter_add", index, d, n);

  Tensor y = empty(x.shape(), x.dtype());
  copy_kernel(y, x);
  const IndexLoop loop(index.shape(), static_cast<size_t>(d));
  const std::vector<int64_t> y_outer = loop.offsets(y.strides(), true);
  const std::vector<int64_t> y_inner = loop.offsets(y.strides(), false);
  const std::vector<int64_t> s_outer = loop.offsets(src.strides(), true);
  const std::vector<int64_t> s_inner = loop.offsets(src.strides(), false);
  const int64_t y_step = x.dim() == 0 ? 0 : y.stride(d);
  const int64_t s_step = x.dim() == 0 ? 0 : src.stride(d);
  dispatch_numeric(x.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    const T* sp = src.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    // One task per (o, i): the k loop (the only one that can hit the same target) stays serial.
    parallel_for(loop.outer * loop.inner, loop.m, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const auto o = static_cast<size_t>(t / loop.inner), i = static_cast<size_t>(t % loop.inner);
        for (int64_t k = 0; k < loop.m; ++k) {
          const int64_t p =
              (static_cast<int64_t>(o) * loop.m + k) * loop.inner + static_cast<int64_t>(i);
          yp[y_outer[o] + idx[static_cast<size_t>(p)] * y_step + y_inner[i]] +=
              sp[s_outer[o] + k * s_step + s_inner[i]];
        }
      }
    });
  });
  if (auto node = make_node<ScatterAddBackward>({&x, &src}, d, src.shape())) {
    if (node->needs_input_grad(1)) node->index.save(index);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// one_hot (not differentiable)
//   forward:   y[..., c] = (indices[...] == c), int64 (..., num_classes)
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  inspect::OpScope op_scope("one_hot", {&indices});
  check_index_dtype("one_hot", indices);
  std::vector<int64_t> idx = indices.to_vector<int64_t>();
  if (num_classes == -1) {
    if (idx.empty())
      throw ValueError("one_hot: cannot infer num_classes from an empty tensor; pass it");
    num_classes = *std::max_element(idx.begin(), idx.end()) + 1;
  } else if (num_classes < 0) {
    throw ValueError(fmt::format("one_hot: num_classes must be >= 0 or -1, got {}", num_classes));
  }
  for (int64_t v : idx)
    if (v < 0 || v >= num_classes)
      throw IndexError(
          fmt::format("one_hot: index {} is out of range for {} classes", v, num_classes));
  Shape out = indices.shape();
  out.push_back(num_classes);
  Tensor y = zeros(out, kInt64);
  int64_t* yp = y.data_ptr<int64_t>();
  for (size_t p = 0; p < idx.size(); ++p) yp[static_cast<int64_t>(p) * num_classes + idx[p]] = 1;
  return y;
}

}  // namespace nabla
