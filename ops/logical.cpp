// any/all count the true elements with an int64 sum (the reduction kernel every sum uses), so
// they share its dim checks and parallel loop. No autograd: the results are bool.
#include "nabla/ops/logical.h"

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/reduce.h"

namespace nabla {

namespace {

// 1 where x is true (nonzero; NaN counts as true, as in PyTorch), as int64.
Tensor truth_count_input(const Tensor& x, bool negate) {
  NoGradGuard no_grad;
  Tensor b = x.dtype() == kBool ? x : ne(x.detach(), 0.0);
  if (negate) b = logical_not(b);
  return b.to(kInt64);
}

Tensor any_all(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, bool is_all) {
  // all(x) = no element is false; any(x) = some element is true.
  Tensor count = sum(truth_count_input(x, is_all), dims, keepdim);
  return is_all ? eq(count, 0.0) : gt(count, 0.0);
}

template <class F>
Tensor classify(const char* op, const Tensor& x, bool integral_answer, F f) {
  Tensor y = empty(x.shape(), kBool);
  if (!is_floating(x.dtype())) return y.fill_(integral_answer ? 1.0 : 0.0);
  Tensor xc = x.detach().contiguous();
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = xc.data_ptr<T>();
    bool* yp = y.data_ptr<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = f(xp[i]);
  });
  return y;
}

}  // namespace

Tensor any(const Tensor& x) { return any_all(x, {}, false, false); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  return any_all(x, {normalize_dim("any", dim, x.shape())}, keepdim, false);
}
Tensor all(const Tensor& x) { return any_all(x, {}, false, true); }
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  return any_all(x, {normalize_dim("all", dim, x.shape())}, keepdim, true);
}

Tensor isnan(const Tensor& x) {
  return classify("isnan", x, false, [](auto v) { return std::isnan(v); });
}
Tensor isfinite(const Tensor& x) {
  return classify("isfinite", x, true, [](auto v) { return std::isfinite(v); });
}

}  // namespace nabla
