// prod, amax, amin. Forward kernels run on kernels::rows (reduced dims last, contiguous); the
// backwards are written with ops where practical, so gradients of gradients work.
#include "nabla/ops/reduce_more.h"

#include <fmt/format.h>

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/row_layout.h"
#include "nabla/ops/shape_more.h"

namespace nabla {
namespace {

// The product of every row but element k, for each k: prefix product times suffix product, so a
// zero in the row needs no division (x (..., n) contiguous -> same shape). No autograd.
Tensor products_of_others(const Tensor& rows_data, int64_t n) {
  Tensor out = empty(rows_data.shape(), rows_data.dtype());
  const int64_t nrows = n == 0 ? 0 : rows_data.numel() / n;
  dispatch_float(rows_data.dtype(), "prod", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = rows_data.data_ptr<T>();
    T* op = out.data_ptr<T>();
    parallel_for(nrows, n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = xp + r * n;
        T* orow = op + r * n;
        T acc = T(1);
        for (int64_t k = 0; k < n; ++k) {  // prefix products, exclusive
          orow[k] = acc;
          acc *= xr[k];
        }
        acc = T(1);
        for (int64_t k = n; k-- > 0;) {  // times the exclusive suffix products
          orow[k] *= acc;
          acc *= xr[k];
        }
      }
    });
  });
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// prod (along one dim)
//   forward:   y = prod_k x_k
//   backward:  grad_x_k = grad * prod_{j != k} x_j        saves x
//              Outside create_graph: prefix and suffix products (O(n), exact with zeros).
//              Under create_graph: the same values with ops: the (n, n) matrix of the row with
//              ones on the diagonal, reduced by prod, so the backward is itself recorded.
struct ProdBackward final : Node {
  SavedTensor x{this, "x"};
  int64_t dim;
  Shape keepdim_shape;
  ProdBackward(int64_t d, Shape s) : dim(d), keepdim_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Tensor xs = x.get();
    const int64_t n = xs.size(dim);
    Tensor others;
    if (GradMode::enabled()) {
      const Tensor row = movedim(xs, dim, -1).unsqueeze(-2);  // (..., 1, n)
      Shape square = row.shape();
      square[square.size() - 2] = n;
      const Tensor ar = arange(n);
      const Tensor diagonal = eq(ar.unsqueeze(1), ar.unsqueeze(0));
      others = movedim(prod(where(diagonal, 1.0, row.expand(square)), -1), -1, dim);
    } else {
      const Tensor rows_data = movedim(xs.detach(), dim, -1).contiguous();
      others = movedim(products_of_others(rows_data, n), -1, dim);
    }
    return {mul(grad.reshape(keepdim_shape), others)};
  }
  const char* name() const override { return "ProdBackward"; }
};

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  inspect::OpScope op_scope("prod", {&x});
  dispatch_numeric(x.dtype(), "prod", [](auto) {});
  if (x.dim() == 0) {
    normalize_dim("prod", dim, x.shape());
    return prod(x.reshape({1}), 0, keepdim).reshape({});
  }
  const int64_t d = normalize_dim("prod", dim, x.shape());
  const kernels::Rows r = kernels::rows("prod", x, {d}, keepdim);
  Tensor y = empty(r.out_shape, x.dtype());
  dispatch_numeric(x.dtype(), "prod", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = r.data.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(r.n_out, r.n_red, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        T acc = T(1);
        for (int64_t k = 0; k < r.n_red; ++k) acc *= xp[o * r.n_red + k];
        yp[o] = acc;
      }
    });
  });
  if (auto node = make_node<ProdBackward>({&x}, d, r.keepdim_shape)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

Tensor prod(const Tensor& x) {
  inspect::OpScope op_scope("prod", {&x});
  return prod(x.reshape({-1}), 0).reshape({});
}

// ----------------------------------------------------------------------------
// amax / amin
//   forward:   y = max (min) of x over dims; a NaN in the reduced set gives NaN
//   backward:  grad_x = grad * (x == y) / count(x == y)   (split evenly among ties, as torch)
//              saves x and y
struct ExtremeBackward final : Node {
  SavedTensor x{this, "x"}, y{this, "y"};
  std::vector<int64_t> dims;
  Shape keepdim_shape;
  bool is_max;
  ExtremeBackward(std::vector<int64_t> d, Shape s, bool m)
      : dims(std::move(d)), keepdim_shape(std::move(s)), is_max(m) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Tensor xs = x.get();
    const Tensor hit = eq(xs, y.get().detach().reshape(keepdim_shape)).to(xs.dtype());
    const Tensor count = sum(hit, dims, true);
    return {div(mul(hit, grad.reshape(keepdim_shape)), count)};
  }
  const char* name() const override { return is_max ? "AmaxBackward" : "AminBackward"; }
};

template <bool IsMax>
static Tensor extreme(const char* op, const Tensor& x, const std::vector<int64_t>& dims,
                      bool keepdim) {
  dispatch_numeric(x.dtype(), op, [](auto) {});
  const kernels::Rows r = kernels::rows(op, x, dims, keepdim);
  if (r.n_red == 0)
    throw ShapeError(fmt::format("{}: cannot reduce dims {} of input of shape {}: no elements", op,
                                 shape_str(dims), shape_str(x.shape())));
  Tensor y = empty(r.out_shape, x.dtype());
  dispatch_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = r.data.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(r.n_out, r.n_red, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = xp + o * r.n_red;
        T best = row[0];
        for (int64_t k = 1; k < r.n_red; ++k) {
          const T v = row[k];
          if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(best)) break;
          if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(v)) {
              best = v;
              continue;
            }
          if (IsMax ? v > best : v < best) best = v;
        }
        yp[o] = best;
      }
    });
  });
  if (auto node = make_node<ExtremeBackward>({&x}, dims, r.keepdim_shape, IsMax)) {
    node->x.save(x);
    node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  inspect::OpScope op_scope("amax", {&x});
  return extreme<true>("amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  inspect::OpScope op_scope("amin", {&x});
  return extreme<false>("amin", x, dims, keepdim);
}

}  // namespace nabla
