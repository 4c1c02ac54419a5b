// Shape ops that copy data. Every backward is written with other differentiable ops (narrow,
// expand/sum, pad, tril/triu, index_select), so gradients of gradients work throughout.
#include "nabla/ops/shape.h"

#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/copy.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/kernel_helpers.h"

namespace nabla {
namespace {

// make_node for a variable number of inputs.
template <class N, class... Args>
std::shared_ptr<N> make_node_n(const std::vector<Tensor>& inputs, Args&&... args) {
  if (!GradMode::enabled()) return nullptr;
  if (std::none_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); }))
    return nullptr;
  auto node = std::make_shared<N>(std::forward<Args>(args)...);
  for (const Tensor& t : inputs) {
    node->next.push_back(Edge{gradient_edge(t)});
    node->input_shapes.push_back(t.shape());
    node->input_dtypes.push_back(t.dtype());
  }
  return node;
}

void check_defined(const char* op, const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw ValueError(fmt::format("{}: expects a non-empty list of tensors", op));
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined()) throw ValueError(fmt::format("{}: tensor {} is undefined", op, i));
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].dtype() != tensors[0].dtype())
      throw DTypeError(fmt::format("{}: tensor {} has dtype {} but tensor 0 has dtype {}", op, i,
                                   dtype_name(tensors[i].dtype()), dtype_name(tensors[0].dtype())));
}

}  // namespace

// ----------------------------------------------------------------------------
// cat
//   forward:   y = (x0, x1, ...) joined along dim; the other dims must agree
//   backward:  grad_xi = grad.narrow(dim, offset_i, xi.size(dim))      saves only the sizes
struct CatBackward final : Node {
  int64_t dim;
  std::vector<int64_t> sizes;  // per input along dim; -1 for a skipped 1-D empty input
  CatBackward(int64_t d, std::vector<int64_t> s) : dim(d), sizes(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    std::vector<Tensor> grads(sizes.size());
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < 0) continue;
      if (needs_input_grad(i)) grads[i] = grad.narrow(dim, offset, sizes[i]);
      offset += sizes[i];
    }
    return grads;
  }
  const char* name() const override { return "CatBackward"; }
};

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  inspect::OpScope op_scope("cat", tensors);
  check_defined("cat", tensors);
  // A 1-D tensor with no elements is skipped (as in PyTorch): handy to start an accumulation.
  auto is_empty_1d = [](const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; };
  auto ref_it = std::find_if(tensors.begin(), tensors.end(),
                             [&](const Tensor& t) { return !is_empty_1d(t); });
  const Tensor& ref = ref_it == tensors.end() ? tensors[0] : *ref_it;
  const size_t ref_i = static_cast<size_t>(&ref - tensors.data());
  if (ref.dim() == 0)
    throw ShapeError(
        fmt::format("cat: tensor {} is 0-d (shape ()); cat needs at least 1 dim", ref_i));
  const int64_t d = normalize_dim("cat", dim, ref.shape());

  Shape out = ref.shape();
  out[static_cast<size_t>(d)] = 0;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_empty_1d(t) && ref.dim() != 1) {
      sizes.push_back(-1);
      continue;
    }
    bool ok = t.dim() == ref.dim();
    for (int64_t k = 0; ok && k < t.dim(); ++k) ok = k == d || t.size(k) == ref.size(k);
    if (!ok)
      throw ShapeError(fmt::format(
          "cat: tensor {} has shape {} but tensor {} has shape {}; only dim {} may differ", i,
          shape_str(t.shape()), ref_i, shape_str(ref.shape()), d));
    sizes.push_back(t.size(d));
    out[static_cast<size_t>(d)] += t.size(d);
  }

  Tensor y = empty(out, ref.dtype());
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] <= 0) continue;
    copy_kernel(y.narrow(d, offset, sizes[i]), tensors[i]);
    offset += sizes[i];
  }
  if (auto node = make_node_n<CatBackward>(tensors, d, sizes)) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// stack: cat of the inputs unsqueezed at dim (composite; backward from cat and unsqueeze)
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  inspect::OpScope op_scope("stack", tensors);
  check_defined("stack", tensors);
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].shape() != tensors[0].shape())
      throw ShapeError(fmt::format("stack: tensor {} has shape {} but tensor 0 has shape {}", i,
                                   shape_str(tensors[i].shape()), shape_str(tensors[0].shape())));
  const int64_t d = normalize_dim("stack", dim, tensors[0].shape(), 1);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return cat(parts, d);
}

// ----------------------------------------------------------------------------
// split / chunk: views made with narrow (whose backward embeds the gradient back)
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  inspect::OpScope op_scope("split", {&x});
  if (x.dim() == 0) throw ShapeError("split: cannot split a 0-d tensor (shape ())");
  const int64_t d = normalize_dim("split", dim, x.shape());
  const int64_t n = x.size(d);
  if (split_size < 0 || (split_size == 0 && n > 0))
    throw ValueError(fmt::format("split: split_size must be positive, got {} (dim {} of size {})",
                                 split_size, dim, n));
  if (n == 0) return {x.narrow(d, 0, 0)};
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n; s += split_size)
    out.push_back(x.narrow(d, s, std::min(split_size, n - s)));
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  inspect::OpScope op_scope("split", {&x});
  if (x.dim() == 0) throw ShapeError("split: cannot split a 0-d tensor (shape ())");
  const int64_t d = normalize_dim("split", dim, x.shape());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      throw ValueError(fmt::format("split: size {} is negative (sizes {})", s, shape_str(sizes)));
    total += s;
  }
  if (total != x.size(d))
    throw ShapeError(fmt::format("split: sizes {} sum to {} but dim {} of shape {} has size {}",
                                 shape_str(sizes), total, dim, shape_str(x.shape()), x.size(d)));
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(d, offset, s));
    offset += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  inspect::OpScope op_scope("chunk", {&x});
  if (chunks <= 0) throw ValueError(fmt::format("chunk: chunks must be positive, got {}", chunks));
  if (x.dim() == 0) throw ShapeError("chunk: cannot chunk a 0-d tensor (shape ())");
  const int64_t d = normalize_dim("chunk", dim, x.shape());
  const int64_t n = x.size(d);
  if (n == 0) return std::vector<Tensor>(static_cast<size_t>(chunks), x.narrow(d, 0, 0));
  return split(x, (n + chunks - 1) / chunks, d);
}

// ----------------------------------------------------------------------------
// repeat
//   forward:   y = x tiled, y.shape[i] = r[i] * s[i] (x gets leading size-1 dims if needed)
//   backward:  grad_x = grad.reshape(r0, s0, r1, s1, ...).sum over the r dims
//   composite: x seen as (1, s0, 1, s1, ...), expanded to (r0, s0, r1, s1, ...), copied, viewed
//              as (r0*s0, r1*s1, ...); the expand's backward is exactly that sum.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  inspect::OpScope op_scope("repeat", {&x});
  if (static_cast<int64_t>(repeats.size()) < x.dim())
    throw ShapeError(
        fmt::format("repeat: {} repeats {} given for a tensor of shape {}; need at "
                    "least one per dim",
                    repeats.size(), shape_str(repeats), shape_str(x.shape())));
  for (size_t i = 0; i < repeats.size(); ++i)
    if (repeats[i] < 0)
      throw ValueError(fmt::format("repeat: repeats {} has a negative entry at position {}",
                                   shape_str(repeats), i));
  Shape padded(repeats.size() - static_cast<size_t>(x.dim()), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  Shape interleaved, expanded, out;
  bool overflow = false;  // checked: repeats near INT64_MAX must be an error, not signed overflow
  for (size_t i = 0; i < repeats.size(); ++i) {
    interleaved.insert(interleaved.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    out.push_back(0);
    overflow |= __builtin_mul_overflow(repeats[i], padded[i], &out.back());
  }
  int64_t numel = 1;
  for (int64_t d : out) overflow |= __builtin_mul_overflow(numel, d, &numel);
  if (overflow)
    throw ShapeError(
        fmt::format("repeat: repeats {} of a tensor of shape {} make more than "
                    "2^63 - 1 elements",
                    shape_str(repeats), shape_str(x.shape())));
  // clone, not contiguous: repeat always returns fresh storage, even for all-ones repeats.
  return x.reshape(interleaved).expand(expanded).clone().view(out);
}

// ----------------------------------------------------------------------------
// repeat_interleave (int repeats)
//   forward:   y[..., k, ...] = x[..., k / r, ...] along dim
//   backward:  grad_x = grad.unflatten(dim, (s, r)).sum(dim + 1)
//   composite: x.unsqueeze(dim + 1) expanded to (..., s, r, ...), copied, flattened
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  inspect::OpScope op_scope("repeat_interleave", {&x});
  if (repeats < 0)
    throw ValueError(fmt::format("repeat_interleave: repeats must be >= 0, got {}", repeats));
  if (!dim || x.dim() == 0) {
    if (dim) normalize_dim("repeat_interleave", *dim, x.shape());
    return repeat_interleave(x.reshape({-1}), repeats, 0);
  }
  const int64_t d = normalize_dim("repeat_interleave", *dim, x.shape());
  Shape expanded = x.shape();
  expanded.insert(expanded.begin() + d + 1, repeats);
  return x.unsqueeze(d + 1).expand(expanded).clone().flatten(d, d + 1);
}

// ----------------------------------------------------------------------------
// repeat_interleave (tensor repeats)
//   forward:   y = index_select(x, dim, idx), idx = (0 repeated r[0] times, 1 r[1] times, ...)
//   backward:  index_select's: grad scatter-added back into x's shape
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  inspect::OpScope op_scope("repeat_interleave", {&x, &repeats});
  if (repeats.dtype() != kInt64)
    throw DTypeError(fmt::format("repeat_interleave: repeats must be int64, got {}",
                                 dtype_name(repeats.dtype())));
  if (repeats.dim() > 1)
    throw ShapeError(fmt::format("repeat_interleave: repeats must be 0-d or 1-D, got shape {}",
                                 shape_str(repeats.shape())));
  if (!dim || x.dim() == 0) {
    if (dim) normalize_dim("repeat_interleave", *dim, x.shape());
    return repeat_interleave(x.reshape({-1}), repeats, 0);
  }
  const int64_t d = normalize_dim("repeat_interleave", *dim, x.shape());
  const int64_t n = x.size(d);
  std::vector<int64_t> r = repeats.to_vector<int64_t>();
  if (r.size() == 1) r.assign(static_cast<size_t>(n), r[0]);
  if (static_cast<int64_t>(r.size()) != n)
    throw ShapeError(fmt::format(
        "repeat_interleave: repeats has shape {} but dim {} of x (shape {}) has size {}",
        shape_str(repeats.shape()), *dim, shape_str(x.shape()), n));
  std::vector<int64_t> idx;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] < 0)
      throw ValueError(fmt::format("repeat_interleave: repeats[{}] = {} is negative", i, r[i]));
    idx.insert(idx.end(), static_cast<size_t>(r[i]), static_cast<int64_t>(i));
  }
  return index_select(x, d, from_vector(idx, {static_cast<int64_t>(idx.size())}));
}

// ----------------------------------------------------------------------------
// pad (constant)
//   forward:   y = x with pads[2k] / pads[2k+1] elements of `value` before / after dim -1-k;
//              a negative pad crops instead
//   backward:  grad_x = pad(grad, -pads, 0)   (the adjoint of constant padding is the opposite
//              padding)      saves only the pads
struct PadBackward final : Node {
  std::vector<int64_t> pads;
  explicit PadBackward(std::vector<int64_t> p) : pads(std::move(p)) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    std::vector<int64_t> opposite(pads.size());
    std::transform(pads.begin(), pads.end(), opposite.begin(), [](int64_t p) { return -p; });
    return {pad(grad, opposite, 0.0)};
  }
  const char* name() const override { return "PadBackward"; }
};

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  inspect::OpScope op_scope("pad", {&x});
  kernels::check_scalar_fits("pad", x, value);
  const int64_t nd = x.dim();
  if (pads.size() % 2 != 0 || static_cast<int64_t>(pads.size()) > 2 * nd)
    throw ShapeError(
        fmt::format("pad: pads {} for a tensor of shape {}; expects an even number "
                    "of pads, at most 2 per dim",
                    shape_str(pads), shape_str(x.shape())));
  // Per dim, x's window [src, src + len) lands at [dst, dst + len) of y.
  Shape out = x.shape(), src(static_cast<size_t>(nd), 0), dst(static_cast<size_t>(nd), 0);
  Shape len = x.shape();
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const auto d = static_cast<size_t>(nd - 1) - k;
    const int64_t lo = pads[2 * k], hi = pads[2 * k + 1], n = x.shape()[d];
    if (lo == INT64_MIN || hi == INT64_MIN || __builtin_add_overflow(n, lo, &out[d]) ||
        __builtin_add_overflow(out[d], hi, &out[d]))  // checked: -lo and n + lo + hi must fit
      throw ShapeError(fmt::format("pad: pads ({}, {}) overflow dim {} of shape {}", lo, hi, d,
                                   shape_str(x.shape())));
    if (out[d] < 0)
      throw ShapeError(fmt::format("pad: pads ({}, {}) make dim {} of shape {} negative ({})", lo,
                                   hi, d, shape_str(x.shape()), out[d]));
    src[d] = std::max<int64_t>(0, -lo);
    dst[d] = std::max<int64_t>(0, lo);
    len[d] = std::max<int64_t>(0, n - src[d] - std::max<int64_t>(0, -hi));
  }
  Tensor y = full(out, value, x.dtype());
  if (shape_numel(len) > 0) {
    Tensor from = x.detach(), to = y;
    for (int64_t d = 0; d < nd; ++d) {
      const auto i = static_cast<size_t>(d);
      from = from.narrow(d, src[i], len[i]);
      to = to.narrow(d, dst[i], len[i]);
    }
    copy_kernel(to, from);
  }
  if (auto node = make_node<PadBackward>({&x}, pads)) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// tril / triu (over the last two dims)
//   forward:   y[..., i, j] = x[..., i, j] where j - i <= k (tril) / j - i >= k (triu), else 0
//   backward:  grad_x = tril(grad, k) / triu(grad, k)      saves nothing
struct TriBackward final : Node {
  bool lower;
  int64_t k;
  TriBackward(bool l, int64_t diag) : lower(l), k(diag) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {lower ? tril(grad, k) : triu(grad, k)};
  }
  const char* name() const override { return lower ? "TrilBackward" : "TriuBackward"; }
};

static Tensor tri(const char* op, const Tensor& x, int64_t k, bool lower) {
  if (x.dim() < 2)
    throw ShapeError(
        fmt::format("{}: expects at least 2 dims, got shape {}", op, shape_str(x.shape())));
  Tensor y = empty(x.shape(), x.dtype());
  copy_kernel(y, x);
  const int64_t R = x.size(-2), C = x.size(-1);     // rows, columns of each matrix
  const int64_t rows = C == 0 ? 0 : x.numel() / C;  // matrix rows over all batches
  k = std::clamp<int64_t>(k, -R, C);                // same result, no overflow in i + k below
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    parallel_for(rows, C, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t i = r % R;
        // tril zeroes columns (i + k, C); triu zeroes [0, i + k).
        const int64_t lo = lower ? std::clamp<int64_t>(i + k + 1, 0, C) : 0;
        const int64_t hi = lower ? C : std::clamp<int64_t>(i + k, 0, C);
        std::fill(yp + r * C + lo, yp + r * C + hi, T(0));
      }
    });
  });
  if (auto node = make_node<TriBackward>({&x}, lower, k)) set_history(y, node);
  return y;
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  inspect::OpScope op_scope("tril", {&x});
  return tri("tril", x, diagonal, true);
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  inspect::OpScope op_scope("triu", {&x});
  return tri("triu", x, diagonal, false);
}

}  // namespace nabla
