// Printing that reads like PyTorch's repr: tensor([[1.0000, 2.0000], ...], dtype=float64).
// Tensors above 1000 elements are summarised with "..." (3 items at each edge of every dim).
#include <fmt/format.h>

#include <cmath>
#include <ostream>

#include "nabla/core/autograd.h"
#include "nabla/core/tensor.h"

namespace nabla {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Printer {
  const Tensor& t;  // contiguous, detached
  std::vector<double> values;
  bool summarize;
  bool use_sci = false;
  std::string out;

  std::string format_value(double v) const {
    switch (t.dtype()) {
      case DType::Bool:
        return v != 0 ? "True" : "False";
      case DType::Int64:
        return fmt::format("{}", static_cast<int64_t>(v));
      default:
        if (std::isnan(v)) return "nan";
        if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
        return use_sci ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v);
    }
  }

  void print(int64_t dim, int64_t base, int indent) {
    const Shape& s = t.shape();
    if (static_cast<size_t>(dim) == s.size()) {
      out += format_value(values[static_cast<size_t>(base)]);
      return;
    }
    const int64_t n = s[static_cast<size_t>(dim)];
    const int64_t stride = t.strides()[static_cast<size_t>(dim)];
    const bool last_dim = static_cast<size_t>(dim) + 1 == s.size();
    out += '[';
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        out += last_dim ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
        i = n - kEdgeItems;
      }
      print(dim + 1, base + i * stride, indent + 1);
      if (i + 1 < n) out += last_dim ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
    }
    out += ']';
  }
};

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  Tensor c = detach().contiguous();
  Printer p{c, {}, c.numel() > kSummarizeAbove, false, {}};
  p.values.reserve(static_cast<size_t>(c.numel()));
  dispatch_all(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* d = c.data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i) p.values.push_back(static_cast<double>(d[i]));
  });
  double max_abs = 0, min_abs = INFINITY;
  for (double v : p.values)
    if (std::isfinite(v) && v != 0) {
      max_abs = std::max(max_abs, std::abs(v));
      min_abs = std::min(min_abs, std::abs(v));
    }
  p.use_sci = max_abs >= 1e8 || (max_abs > 0 && min_abs < 1e-4);
  std::string body;
  if (c.numel() == 0 && c.dim() > 0) {
    body = "[]";
  } else {
    p.print(0, 0, 7);
    body = p.out;
  }
  std::string s = "tensor(" + body;
  if (c.numel() == 0) s += fmt::format(", size={}", shape_str(shape()));
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool)
    s += fmt::format(", dtype={}", dtype_name(dtype()));
  if (dtype() == kInt64 && numel() == 0) s += ", dtype=int64";
  if (grad_fn())
    s += fmt::format(", grad_fn=<{}>", grad_fn()->name());
  else if (requires_grad())
    s += ", requires_grad=True";
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace nabla
