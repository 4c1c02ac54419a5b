// scatter, masked_select, nonzero. scatter's backward is written with scatter (of zeros) and
// gather, masked_select is an index_select of the flattened broadcast x: gradients of gradients
// work throughout.
#include "nabla/ops/scatter.h"

#include <fmt/format.h>

#include <optional>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/shape.h"

namespace nabla {
namespace {

// index's shape checks (torch.scatter's): x's rank (and src's), no larger than src in any dim
// nor than x in dims other than dim; then the values, each in [0, x.size(dim)).
std::vector<int64_t> checked_scatter_index(const char* op, const Tensor& x, int64_t d,
                                           const Tensor& index, const Tensor* src) {
  if (index.dtype() != kInt64)
    throw DTypeError(fmt::format("{}: index must be int64, got {} (shape {})", op,
                                 dtype_name(index.dtype()), shape_str(index.shape())));
  bool ok = index.dim() == x.dim() && (!src || src->dim() == x.dim());
  for (int64_t k = 0; ok && k < index.dim(); ++k)
    ok = (k == d || index.size(k) <= x.size(k)) && (!src || index.size(k) <= src->size(k));
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: index of shape {} must have the rank of x {}{}{} and be no larger than x in dims "
        "other than {}{}",
        op, shape_str(index.shape()), shape_str(x.shape()), src ? " and src " : "",
        src ? shape_str(src->shape()) : "", d, src ? " (nor than src in any dim)" : ""));
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  std::vector<int64_t> idx = index.to_vector<int64_t>();
  for (int64_t v : idx)
    if (v < 0 || v >= n)
      throw IndexError(
          fmt::format("{}: index {} is out of range for dim {} of size {} (x of "
                      "shape {})",
                      op, v, d, n, shape_str(x.shape())));
  return idx;
}

// y = copy of x, then the writes; src is null for the value form. No autograd.
Tensor scatter_kernel(const Tensor& x, int64_t d, const Tensor& index,
                      const std::vector<int64_t>& idx, const Tensor* src, double value) {
  Tensor y = x.detach().clone();
  const auto nd = static_cast<size_t>(index.dim());
  const Shape& shape = index.shape();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    const T* sp = src ? src->data_ptr<T>() : nullptr;
    const T fill = static_cast<T>(value);
    std::vector<int64_t> pos(nd, 0);  // the index position, row-major, counted by hand
    // Serial: with duplicate targets the last write must win, deterministically.
    for (size_t p = 0; p < idx.size(); ++p) {
      int64_t y_off = 0, s_off = 0;
      for (size_t k = 0; k < nd; ++k) {
        y_off += (k == static_cast<size_t>(d) ? idx[p] : pos[k]) * y.strides()[k];
        if (src) s_off += pos[k] * src->strides()[k];
      }
      yp[y_off] = src ? sp[s_off] : fill;
      for (size_t k = nd; k-- > 0;) {
        if (++pos[k] < shape[k]) break;
        pos[k] = 0;
      }
    }
  });
  return y;
}

}  // namespace

// ----------------------------------------------------------------------------
// scatter
//   forward:   y = x;  y[i][index[i][j][k]][k] = src[i][j][k]  (dim = 1; any rank)
//   backward:  grad_x = scatter(grad, dim, index, 0)   (overwritten elements get nothing)
//              grad_src = gather(grad, dim, index), zero-padded to src's shape      saves index
struct ScatterBackward final : Node {
  SavedTensor index{this, "index"};
  int64_t dim;
  std::optional<Shape> src_shape;  // none for the value form
  ScatterBackward(int64_t d, std::optional<Shape> s) : dim(d), src_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    std::vector<Tensor> grads(src_shape ? 2 : 1);
    if (needs_input_grad(0)) grads[0] = scatter(grad, dim, index.get(), 0.0);
    if (src_shape && needs_input_grad(1)) {
      Tensor g = gather(grad, dim, index.get());
      std::vector<int64_t> pads;  // F.pad order: last dim first
      for (size_t k = src_shape->size(); k-- > 0;)
        pads.insert(pads.end(), {0, (*src_shape)[k] - g.shape()[k]});
      grads[1] = g.shape() == *src_shape ? g : pad(g, pads, 0.0);
    }
    return grads;
  }
  const char* name() const override { return "ScatterBackward"; }
};

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  inspect::OpScope op_scope("scatter", {&x, &index, &src});
  if (x.dtype() != src.dtype())
    throw DTypeError(fmt::format("scatter: x is {} {} but src is {} {}", dtype_name(x.dtype()),
                                 shape_str(x.shape()), dtype_name(src.dtype()),
                                 shape_str(src.shape())));
  const int64_t d = normalize_dim("scatter", dim, x.shape());
  const std::vector<int64_t> idx = checked_scatter_index("scatter", x, d, index, &src);
  Tensor y = scatter_kernel(x, d, index, idx, &src, 0.0);
  if (auto node = make_node<ScatterBackward>({&x, &src}, d, src.shape())) {
    node->index.save(index);
    set_history(y, node);
  }
  return y;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  inspect::OpScope op_scope("scatter", {&x, &index});
  kernels::check_scalar_fits("scatter", x, value);
  const int64_t d = normalize_dim("scatter", dim, x.shape());
  const std::vector<int64_t> idx = checked_scatter_index("scatter", x, d, index, nullptr);
  Tensor y = scatter_kernel(x, d, index, idx, nullptr, value);
  if (auto node = make_node<ScatterBackward>({&x}, d, std::nullopt)) {
    node->index.save(index);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// nonzero (not differentiable)
Tensor nonzero(const Tensor& x) {
  inspect::OpScope op_scope("nonzero", {&x});
  const Tensor xc = x.detach().contiguous();
  const auto nd = static_cast<size_t>(x.dim());
  std::vector<int64_t> out;
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    std::vector<int64_t> pos(nd, 0);
    for (int64_t p = 0; p < xc.numel(); ++p) {
      if (xp[p] != T(0)) out.insert(out.end(), pos.begin(), pos.end());
      for (size_t k = nd; k-- > 0;) {
        if (++pos[k] < x.shape()[k]) break;
        pos[k] = 0;
      }
    }
  });
  int64_t count = 0;
  if (nd > 0) {
    count = static_cast<int64_t>(out.size() / nd);
  } else if (x.item() != 0.0) {
    count = 1;  // a nonzero 0-d tensor: one hit with no coordinates
  }
  return from_vector(out, {count, static_cast<int64_t>(nd)});
}

// ----------------------------------------------------------------------------
// masked_select
//   forward:   y = x.expand(shape).reshape(-1)[positions of true in mask.expand(shape)]
//   backward:  index_select's (index_add into the flattened shape), summed down by expand's
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  inspect::OpScope op_scope("masked_select", {&x, &mask});
  if (mask.dtype() != kBool)
    throw DTypeError(fmt::format("masked_select: mask must be bool, got {} (shape {})",
                                 dtype_name(mask.dtype()), shape_str(mask.shape())));
  const Shape shape = broadcast_shapes("masked_select", x.shape(), mask.shape());
  const std::vector<bool> hits = mask.expand(shape).contiguous().to_vector<bool>();
  std::vector<int64_t> positions;
  for (size_t p = 0; p < hits.size(); ++p)
    if (hits[p]) positions.push_back(static_cast<int64_t>(p));
  const Tensor flat = x.expand(shape).reshape({-1});
  return index_select(flat, 0, from_vector(positions, {static_cast<int64_t>(positions.size())}));
}

}  // namespace nabla
