#include "nabla/core/shape.h"

#include <fmt/format.h>

#include "nabla/core/error.h"

namespace nabla {

std::string shape_str(const Shape& s) {
  if (s.size() == 1) return fmt::format("({},)", s[0]);
  return fmt::format("({})", fmt::join(s, ", "));
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    if (d < 0) throw ShapeError(fmt::format("negative dimension in shape {}", shape_str(s)));
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  // A 0 anywhere makes the product 0 even if a partial product overflowed on the way.
  for (int64_t d : s)
    if (d == 0) return 0;
  if (overflow)
    throw ShapeError(fmt::format("shape {} has more than 2^63 - 1 elements", shape_str(s)));
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    if (i > 0 && __builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc))
      throw ShapeError(
          fmt::format("shape {} cannot be laid out: the stride of dim {} exceeds 2^63 - 1",
                      shape_str(s), i - 1));
  }
  return st;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  if (a == b) return a;  // the common case, without the loop
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(fmt::format("{}: shapes {} and {} cannot be broadcast together", op,
                                   shape_str(a), shape_str(b)));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_dim(const char* op, int64_t dim, const Shape& shape, int64_t inserted) {
  const int64_t nd = static_cast<int64_t>(shape.size()) + inserted;
  const int64_t lo = nd == 0 ? -1 : -nd, hi = nd == 0 ? 0 : nd - 1;
  if (dim < lo || dim > hi)
    throw ShapeError(fmt::format("{}: dim {} is out of range [{}, {}] for input of shape {}", op,
                                 dim, lo, hi, shape_str(shape)));
  return dim < 0 ? dim + std::max<int64_t>(nd, 1) : dim;
}

int64_t existing_dim(const char* op, int64_t dim, const Shape& shape) {
  if (shape.empty())
    throw ShapeError(fmt::format("{}: dim {} of a 0-d tensor (shape ()): it has no dims", op, dim));
  return normalize_dim(op, dim, shape);
}

}  // namespace nabla
