// How ops see a tensor along dims, shared by every op that works row by row: the (outer, n, inner)
// view around one dim (softmax, log_softmax, cross_entropy's classes, max/argmax, cumsum), the
// set of dims a reduction names, and the "reduced dims last" view of the multi-dim reductions
// (var, std, logsumexp, norm). Dims are checked by core's normalize_dim. No autograd here.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/core/tensor.h"

namespace nabla::kernels {

// A tensor of shape s, contiguous, seen around one dim as (outer, n, inner): outer is the product
// of the dims before it, n its size, inner the product of the dims after it. Row r (of outer *
// inner) holds the n elements data[row_start(r) + k * inner]; with inner == 1 rows are contiguous.
// A 0-d tensor is one row of one element.
struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t rows() const { return outer * inner; }
  int64_t row_start(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

// dim must already be wrapped into [0, ndim) (normalize_dim).
inline RowLayout row_layout(const Shape& s, int64_t dim) {
  RowLayout l;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    const int64_t size = s[static_cast<size_t>(d)];
    if (d < dim) l.outer *= size;
    if (d == dim) l.n = size;
    if (d > dim) l.inner *= size;
  }
  return l;
}

// Which of shape's dims `dims` names (every dim when dims is empty), each checked by
// normalize_dim; a dim named twice is a ShapeError. A 0-d tensor accepts dim 0 and -1 and has no
// dim to mark, like PyTorch's sum(scalar, 0).
inline std::vector<bool> reduced_dims(const char* op, const Shape& shape,
                                      const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(shape.size(), dims.empty());
  std::vector<bool> seen(std::max<size_t>(shape.size(), 1), false);
  for (int64_t d : dims) {
    auto i = static_cast<size_t>(normalize_dim(op, d, shape));
    if (seen[i])
      throw ShapeError(
          fmt::format("{}: dim {} appears twice for input of shape {}", op, d, shape_str(shape)));
    seen[i] = true;
    if (!shape.empty()) reduced[i] = true;
  }
  return reduced;
}

// x with its reduced dims moved last, contiguous: output element r reduces
// data[r * n_red, (r + 1) * n_red). Empty dims means every dim.
struct Rows {
  Tensor data;  // contiguous, detached
  int64_t n_out = 1, n_red = 1;
  Shape keepdim_shape;  // x's shape with reduced dims set to 1
  Shape out_shape;      // keepdim_shape, or without the reduced dims
};

inline Rows rows(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t nd = x.dim();
  const std::vector<bool> reduced = reduced_dims(op, x.shape(), dims);
  Rows r;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[static_cast<size_t>(d)]) perm.push_back(d);
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[static_cast<size_t>(d)]) perm.push_back(d);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = x.size(d);
    if (reduced[static_cast<size_t>(d)]) {
      r.n_red *= n;
      r.keepdim_shape.push_back(1);
      if (keepdim) r.out_shape.push_back(1);
    } else {
      r.n_out *= n;
      r.keepdim_shape.push_back(n);
      r.out_shape.push_back(n);
    }
  }
  r.data = (nd == 0 ? x.detach() : x.detach().permute(perm)).contiguous();
  return r;
}

}  // namespace nabla::kernels
