// flip, roll, tile, unbind, movedim: composites of differentiable ops (the backward of each is
// the backward of its parts: index_select -> index_add, cat -> narrow, repeat -> sum).
#include "nabla/ops/shape_more.h"

#include <fmt/format.h>

#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/row_layout.h"
#include "nabla/ops/shape.h"

namespace nabla {

// ----------------------------------------------------------------------------
// flip
//   forward:   y[..., i, ...] = x[..., n - 1 - i, ...] for each flipped dim
//   backward:  grad_x = flip(grad, dims)          (index_select's backward, per dim)
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  inspect::OpScope op_scope("flip", {&x});
  const std::vector<bool> flipped = kernels::reduced_dims("flip", x.shape(), dims);
  Tensor y = x;
  bool copied = false;
  for (int64_t d = 0; d < x.dim() && !dims.empty(); ++d) {
    if (!flipped[static_cast<size_t>(d)]) continue;
    const int64_t n = x.size(d);
    y = index_select(y, d, arange(static_cast<double>(n - 1), -1.0, -1.0));
    copied = true;
  }
  return copied ? y : x.clone();  // always fresh storage, as torch.flip
}

// ----------------------------------------------------------------------------
// roll
//   forward:   y[..., (i + s) mod n, ...] = x[..., i, ...] along each rolled dim
//   composite: cat(x.narrow(d, n - s, s), x.narrow(d, 0, n - s)) with s wrapped into [0, n)
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  inspect::OpScope op_scope("roll", {&x});
  if (dims.empty()) {
    if (shifts.size() != 1)
      throw ShapeError(fmt::format(
          "roll: without dims expects exactly one shift (x is rolled flattened), got shifts {}",
          shape_str(shifts)));
    return roll(x.reshape({-1}), shifts, {0}).view(x.shape());
  }
  if (shifts.size() != dims.size())
    throw ShapeError(fmt::format("roll: shifts {} and dims {} must have the same length",
                                 shape_str(shifts), shape_str(dims)));
  Tensor y = x;
  bool copied = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = existing_dim("roll", dims[i], x.shape());
    const int64_t n = x.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    y = cat({y.narrow(d, n - s, s), y.narrow(d, 0, n - s)}, d);
    copied = true;
  }
  return copied ? y : x.clone();
}

// ----------------------------------------------------------------------------
// tile: repeat with reps padded by leading 1s to x's rank
Tensor tile(const Tensor& x, const std::vector<int64_t>& reps) {
  inspect::OpScope op_scope("tile", {&x});
  for (int64_t r : reps)
    if (r < 0)
      throw ValueError(fmt::format("tile: reps {} has a negative entry (x of shape {})",
                                   shape_str(reps), shape_str(x.shape())));
  std::vector<int64_t> padded(
      static_cast<size_t>(std::max<int64_t>(0, x.dim() - static_cast<int64_t>(reps.size()))), 1);
  padded.insert(padded.end(), reps.begin(), reps.end());
  return repeat(x, padded);
}

// ----------------------------------------------------------------------------
// unbind: the selects along dim (each select's backward embeds its gradient slice)
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  inspect::OpScope op_scope("unbind", {&x});
  const int64_t d = existing_dim("unbind", dim, x.shape());
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(x.size(d)));
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(x.select(d, i));
  return out;
}

// ----------------------------------------------------------------------------
// movedim: a permute. perm[destination[i]] = source[i]; the remaining positions take the
// remaining dims in their original order (torch.movedim).
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination) {
  inspect::OpScope op_scope("movedim", {&x});
  if (source.size() != destination.size())
    throw ShapeError(fmt::format(
        "movedim: source {} and destination {} must have the same number of dims (x of shape {})",
        shape_str(source), shape_str(destination), shape_str(x.shape())));
  const std::vector<bool> from = kernels::reduced_dims("movedim", x.shape(), source);
  kernels::reduced_dims("movedim", x.shape(), destination);  // range and duplicates
  if (x.dim() == 0) return x.view({});
  const auto nd = static_cast<size_t>(x.dim());
  std::vector<int64_t> perm(nd, -1);
  for (size_t i = 0; i < source.size(); ++i)
    perm[static_cast<size_t>(normalize_dim("movedim", destination[i], x.shape()))] =
        normalize_dim("movedim", source[i], x.shape());
  size_t next = 0;
  for (size_t d = 0; d < nd; ++d) {
    if (from[d] && !source.empty()) continue;
    while (perm[next] != -1) ++next;
    perm[next] = static_cast<int64_t>(d);
  }
  return x.permute(perm);
}

Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, std::vector<int64_t>{source}, std::vector<int64_t>{destination});
}

}  // namespace nabla
