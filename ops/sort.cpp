// topk, sort and argsort: one row kernel orders each row's positions by (value, position), a
// total order, so std::sort and std::partial_sort give the stable result whatever their
// algorithm, and a row's result does not depend on how rows are split among threads.
#include "nabla/ops/sort.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/row_layout.h"

namespace nabla {
namespace {

// True when a comes strictly before b in the requested direction; NaN is the largest value and
// all NaNs are equal (PyTorch's sort).
template <class T>
bool before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    if (descending) return !std::isnan(b) && (std::isnan(a) || a > b);
    return !std::isnan(a) && (std::isnan(b) || a < b);
  } else {
    return descending ? a > b : a < b;
  }
}

void check_dtype(const char* op, const Tensor& x) {
  if (x.dtype() == kBool)
    throw DTypeError(fmt::format("{}: expected float32, float64 or int64, got bool (shape {})", op,
                                 shape_str(x.shape())));
}

// The first k positions of every row of x along dim in sorted order, and their values
// (no autograd). dim is wrapped; 0 <= k <= x.size(dim) (1 for a 0-d x).
ValuesIndices order_rows(const char* op, const Tensor& x, int64_t dim, int64_t k, bool descending) {
  const kernels::RowLayout l = kernels::row_layout(x.shape(), dim);
  Shape out_shape = x.shape();
  if (!out_shape.empty()) out_shape[static_cast<size_t>(dim)] = k;
  ValuesIndices r{empty(out_shape, x.dtype()), empty(out_shape, kInt64)};
  if (k == 0 || l.rows() == 0) return r;
  const Tensor xc = x.detach().contiguous();
  const kernels::RowLayout out{l.outer, k, l.inner};
  // Cost of one row: n log2 n comparisons, each a few loads.
  const int64_t cost = l.n * (std::bit_width(static_cast<uint64_t>(l.n)) + 1) * 4;
  dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    T* vp = r.values.data_ptr<T>();
    int64_t* ip = r.indices.data_ptr<int64_t>();
    parallel_for(l.rows(), cost, [&](int64_t b, int64_t e) {
      std::vector<T> row(static_cast<size_t>(l.n));
      std::vector<int64_t> pos(static_cast<size_t>(l.n));
      auto first = [&](int64_t i, int64_t j) {  // ties by position: a total order
        const T a = row[static_cast<size_t>(i)], c = row[static_cast<size_t>(j)];
        if (before(a, c, descending)) return true;
        if (before(c, a, descending)) return false;
        return i < j;
      };
      for (int64_t j = b; j < e; ++j) {
        const T* src = xp + l.row_start(j);
        for (int64_t s = 0; s < l.n; ++s) row[static_cast<size_t>(s)] = src[s * l.inner];
        std::iota(pos.begin(), pos.end(), int64_t{0});
        if (k == l.n)
          std::sort(pos.begin(), pos.end(), first);
        else
          std::partial_sort(pos.begin(), pos.begin() + k, pos.end(), first);
        const int64_t at = out.row_start(j);
        for (int64_t s = 0; s < k; ++s) {
          const int64_t p = pos[static_cast<size_t>(s)];
          vp[at + s * l.inner] = row[static_cast<size_t>(p)];
          ip[at + s * l.inner] = p;
        }
      }
    });
  });
  return r;
}

}  // namespace

// ----------------------------------------------------------------------------
// topk and sort
//   forward:   indices = the first k positions along dim in stable sorted order (k = n for
//              sort), values = x at those positions
//   backward:  grad_x = scatter_add(zeros(x.shape), dim, indices, grad): each chosen position
//              gets its output's gradient (positions are distinct), the others 0
//              saves indices
struct OrderBackward final : Node {
  SavedTensor indices{this, "indices"};
  Shape input_shape;
  int64_t dim;
  const char* op_name;
  OrderBackward(Shape s, int64_t d, const char* name)
      : input_shape(std::move(s)), dim(d), op_name(name) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {scatter_add(zeros(input_shape, grad.dtype()), dim, indices.get(), grad)};
  }
  const char* name() const override { return op_name; }
};

namespace {
ValuesIndices record(const Tensor& x, ValuesIndices r, int64_t dim, const char* node_name) {
  if (auto node = make_node<OrderBackward>({&x}, x.shape(), dim, node_name)) {
    node->indices.save(r.indices);
    set_history(r.values, node);
  }
  return r;
}
}  // namespace

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  inspect::OpScope op_scope("topk", {&x});
  (void)sorted;  // always sorted: a valid order for sorted = false too
  check_dtype("topk", x);
  const int64_t d = normalize_dim("topk", dim, x.shape());
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  if (k < 0 || k > n)
    throw ValueError(
        fmt::format("topk: k = {} is out of range for dim {} of size {} (input of "
                    "shape {}); expects 0 <= k <= {}",
                    k, dim, n, shape_str(x.shape()), n));
  // A 0-d x has no dim to shorten: k = 0 returns its element too, as torch.topk does.
  const int64_t rows_k = x.dim() == 0 ? 1 : k;
  return record(x, order_rows("topk", x, d, rows_k, largest), d, "TopkBackward");
}

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  inspect::OpScope op_scope("sort", {&x});
  (void)stable;  // always stable
  check_dtype("sort", x);
  const int64_t d = normalize_dim("sort", dim, x.shape());
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  return record(x, order_rows("sort", x, d, n, descending), d, "SortBackward");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  inspect::OpScope op_scope("argsort", {&x});
  inspect::note_non_differentiable("argsort", {&x});
  (void)stable;
  check_dtype("argsort", x);
  const int64_t d = normalize_dim("argsort", dim, x.shape());
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  return order_rows("argsort", x, d, n, descending).indices;
}

}  // namespace nabla
