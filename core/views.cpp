// View ops: new shape/strides/offset over the same storage, no data copied. Each is
// differentiable; its backward maps the gradient back onto the input's shape.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "nabla/core/autograd.h"
#include "nabla/core/broadcast.h"
#include "nabla/core/copy.h"
#include "nabla/core/error.h"
#include "nabla/core/tensor.h"

namespace nabla {
namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->dtype = base.dtype();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->is_view = true;
  return Tensor(impl);
}

// Strides that let a tensor of (shape, strides) be seen as new_shape without a copy, if any.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape) {
  if (shape.empty() || shape_numel(shape) == 0) return contiguous_strides(new_shape);
  Shape out(new_shape.size());
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    bool chunk_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_shape(const char* op, const Shape& requested, int64_t numel, const Shape& from) {
  Shape shape = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0)
        throw ShapeError(
            fmt::format("{}: only one dim can be -1 in shape {}", op, shape_str(requested)));
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw ShapeError(
          fmt::format("{}: invalid size {} in shape {}", op, shape[i], shape_str(requested)));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw ShapeError(
          fmt::format("{}: shape {} has more than 2^63 - 1 elements", op, shape_str(requested)));
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0)
      throw ShapeError(fmt::format("{}: shape {} is invalid for input of shape {}", op,
                                   shape_str(requested), shape_str(from)));
    shape[static_cast<size_t>(infer_at)] = numel / known;
  }
  if (shape_numel(shape) != numel)
    throw ShapeError(fmt::format("{}: shape {} is invalid for input of shape {} ({} elements)", op,
                                 shape_str(requested), shape_str(from), numel));
  return shape;
}

}  // namespace

// ----------------------------------------------------------------------------
// view / reshape / squeeze / unsqueeze / flatten / unflatten
//   forward:   y = x seen with a new shape (same elements, same order)
//   backward:  grad_x = grad.reshape(x.shape)
struct ViewBackward final : Node {
  Shape input_shape;
  explicit ViewBackward(Shape s) : input_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad.reshape(input_shape)}; }
  const char* name() const override { return "ViewBackward"; }
};

static Tensor view_as_shape(const Tensor& x, const Shape& shape, const Shape& strides) {
  Tensor y = make_view(x, shape, strides, x.offset());
  if (auto node = make_node<ViewBackward>({&x}, x.shape())) set_history(y, node);
  return y;
}

Tensor Tensor::view(const Shape& requested) const {
  Shape shape = infer_shape("view", requested, numel(), this->shape());
  auto st = view_strides(this->shape(), strides(), shape);
  if (!st)
    throw ShapeError(fmt::format(
        "view: shape {} is not compatible with the strides {} of input {}; use reshape()",
        shape_str(requested), shape_str(strides()), shape_str(this->shape())));
  return view_as_shape(*this, shape, *st);
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape = infer_shape("reshape", requested, numel(), this->shape());
  if (auto st = view_strides(this->shape(), strides(), shape))
    return view_as_shape(*this, shape, *st);
  return clone().view(shape);
}

Tensor Tensor::squeeze() const {
  Shape s, st;
  for (size_t i = 0; i < shape().size(); ++i)
    if (shape()[i] != 1) {
      s.push_back(shape()[i]);
      st.push_back(strides()[i]);
    }
  return view_as_shape(*this, s, st);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return view_as_shape(*this, shape(), strides());
  auto i = static_cast<size_t>(normalize_dim("squeeze", d, shape()));
  if (shape()[i] != 1) return view_as_shape(*this, shape(), strides());
  Shape s = shape(), st = strides();
  s.erase(s.begin() + static_cast<int64_t>(i));
  st.erase(st.begin() + static_cast<int64_t>(i));
  return view_as_shape(*this, s, st);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  auto i = static_cast<size_t>(normalize_dim("unsqueeze", d, shape(), 1));
  Shape s = shape(), st = strides();
  // Any stride addresses a size-1 dim; the row-major one unless it overflows (size-0 tensors).
  int64_t stride_here = 1;
  if (i < s.size() && __builtin_mul_overflow(st[i], s[i], &stride_here)) stride_here = 1;
  s.insert(s.begin() + static_cast<int64_t>(i), 1);
  st.insert(st.begin() + static_cast<int64_t>(i), stride_here);
  return view_as_shape(*this, s, st);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = normalize_dim("flatten", start_dim, shape());
  int64_t e = normalize_dim("flatten", end_dim, shape());
  if (s > e)
    throw ShapeError(fmt::format("flatten: start_dim {} is after end_dim {}", start_dim, end_dim));
  Shape out(shape().begin(), shape().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i)
    if (__builtin_mul_overflow(n, shape()[static_cast<size_t>(i)], &n))
      throw ShapeError(
          fmt::format("flatten: dims {}..{} of shape {} hold more than 2^63 - 1 "
                      "elements",
                      s, e, shape_str(shape())));
  out.push_back(n);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const {
  auto i = existing_dim("unflatten", d, shape());
  Shape inner = infer_shape("unflatten", sizes, shape()[static_cast<size_t>(i)], {shape()[i]});
  Shape out(shape().begin(), shape().begin() + i);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), shape().begin() + i + 1, shape().end());
  return view(out);
}

// ----------------------------------------------------------------------------
// permute / transpose
//   forward:   y = x with dims reordered: y.shape[i] = x.shape[dims[i]]
//   backward:  grad_x = grad.permute(inverse(dims))
struct PermuteBackward final : Node {
  std::vector<int64_t> inverse;
  explicit PermuteBackward(std::vector<int64_t> inv) : inverse(std::move(inv)) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad.permute(inverse)}; }
  const char* name() const override { return "PermuteBackward"; }
};

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  if (static_cast<int64_t>(dims.size()) != dim())
    throw ShapeError(fmt::format("permute: {} dims given for a tensor of shape {}", dims.size(),
                                 shape_str(shape())));
  std::vector<int64_t> norm(dims.size()), inverse(dims.size(), -1);
  Shape s(dims.size()), st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    norm[i] = normalize_dim("permute", dims[i], shape());
    auto src = static_cast<size_t>(norm[i]);
    if (inverse[src] != -1)
      throw ShapeError(fmt::format("permute: dim {} repeated in the permutation", norm[i]));
    inverse[src] = static_cast<int64_t>(i);
    s[i] = shape()[src];
    st[i] = strides()[src];
  }
  Tensor y = make_view(*this, s, st, offset());
  if (auto node = make_node<PermuteBackward>({this}, inverse)) set_history(y, node);
  return y;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) return permute({});
  std::vector<int64_t> perm(static_cast<size_t>(dim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(normalize_dim("transpose", d0, shape()))],
            perm[static_cast<size_t>(normalize_dim("transpose", d1, shape()))]);
  return permute(perm);
}

Tensor Tensor::t() const {
  if (dim() > 2)
    throw ShapeError(
        fmt::format("t: expects a tensor with <= 2 dims, got shape {}", shape_str(shape())));
  return dim() < 2 ? permute(dim() == 1 ? std::vector<int64_t>{0} : std::vector<int64_t>{})
                   : transpose(0, 1);
}

Tensor Tensor::mT() const {
  if (dim() < 2)
    throw ShapeError(fmt::format("mT: expects at least 2 dims, got shape {}", shape_str(shape())));
  return transpose(-2, -1);
}

// ----------------------------------------------------------------------------
// One past the last index a slice of `length` elements from `start` by `step` touches; unlike
// start + length * step it cannot overflow (every index it passes is inside the dim).
static int64_t slice_end(int64_t start, int64_t length, int64_t step) {
  return length == 0 ? start : start + (length - 1) * step + 1;
}

// ----------------------------------------------------------------------------
// slice_embed: the adjoint of slice, used by slice's and select's backward
//   forward:   y = zeros(input_shape); y.slice(dim, start, ..., step) = g
//   backward:  grad_g = grad.slice(dim, start, start + g.size(dim) * step, step)
struct SliceEmbedBackward final : Node {
  int64_t dim, start, step, length;
  SliceEmbedBackward(int64_t d, int64_t s, int64_t st, int64_t len)
      : dim(d), start(s), step(st), length(len) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {grad.slice(dim, start, slice_end(start, length, step), step)};
  }
  const char* name() const override { return "SliceEmbedBackward"; }
};

static Tensor slice_embed(const Tensor& g, const Shape& input_shape, int64_t dim, int64_t start,
                          int64_t step) {
  const int64_t len = g.shape()[static_cast<size_t>(dim)];
  const int64_t n = input_shape[static_cast<size_t>(dim)];
  Tensor y;
  if (step == 1) {  // zero only what the window does not cover: each byte is written once
    y = empty(input_shape, g.dtype());
    Tensor yd = y.detach();
    if (start > 0) yd.narrow(dim, 0, start).zero_();
    if (start + len < n) yd.narrow(dim, start + len, n - start - len).zero_();
  } else {
    y = zeros(input_shape, g.dtype());
  }
  Tensor window = y.detach().slice(dim, start, slice_end(start, len, step), step);
  copy_kernel(window, g);
  if (auto node = make_node<SliceEmbedBackward>({&g}, dim, start, step, len)) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// slice / narrow
//   forward:   y = x[..., start:end:step, ...] along dim
//   backward:  grad_x = zeros like x with grad written into that window (slice_embed)
struct SliceBackward final : Node {
  Shape input_shape;
  int64_t dim, start, step;
  SliceBackward(Shape s, int64_t d, int64_t st, int64_t sp)
      : input_shape(std::move(s)), dim(d), start(st), step(sp) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {slice_embed(grad, input_shape, dim, start, step)};
  }
  bool backward_into(const Tensor& grad, Tensor& input_grad) override {
    const int64_t len = grad.shape()[static_cast<size_t>(dim)];
    grad_add_(input_grad.slice(dim, start, slice_end(start, len, step), step), grad);
    return true;
  }
  const char* name() const override { return "SliceBackward"; }
};

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  auto i = static_cast<size_t>(existing_dim("slice", d, shape()));
  if (step <= 0) throw ValueError(fmt::format("slice: step must be positive, got {}", step));
  const int64_t n = shape()[i];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  // Written so that no step or bound near INT64_MAX overflows: end - start >= 0 fits.
  s[i] = end > start ? (end - start - 1) / step + 1 : 0;
  // A step only matters between two elements, and then stride * step addresses one of them.
  if (s[i] > 1 && __builtin_mul_overflow(strides()[i], step, &st[i]))
    throw ShapeError(fmt::format("slice: step {} times stride {} of dim {} overflows int64", step,
                                 strides()[i], d));
  // An empty slice addresses nothing: its offset stays put (start * stride may not fit).
  const int64_t new_offset = s[i] > 0 ? offset() + start * strides()[i] : offset();
  Tensor y = make_view(*this, s, st, new_offset);
  if (auto node = make_node<SliceBackward>({this}, shape(), static_cast<int64_t>(i), start, step))
    set_history(y, node);
  return y;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  auto i = static_cast<size_t>(existing_dim("narrow", d, shape()));
  const int64_t n = shape()[i];
  const int64_t begin = start < 0 ? start + n : start;
  // As PyTorch: a start outside [-n, n] or a window past the end is an IndexError.
  if (length < 0)
    throw ValueError(
        fmt::format("narrow: start {} and length {}: the length must be >= 0 (shape {})", start,
                    length, shape_str(shape())));
  if (begin < 0 || begin > n || length > n - begin)
    throw IndexError(
        fmt::format("narrow: start {} and length {} are out of range for dim {} of "
                    "size {} (shape {})",
                    start, length, d, n, shape_str(shape())));
  return slice(static_cast<int64_t>(i), begin, begin + length, 1);
}

// ----------------------------------------------------------------------------
// select
//   forward:   y = x[..., index, ...] (dim removed)
//   backward:  grad_x = slice_embed(grad.unsqueeze(dim), x.shape, dim, index, 1)
struct SelectBackward final : Node {
  Shape input_shape;
  int64_t dim, index;
  SelectBackward(Shape s, int64_t d, int64_t i) : input_shape(std::move(s)), dim(d), index(i) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {slice_embed(grad.unsqueeze(dim), input_shape, dim, index, 1)};
  }
  bool backward_into(const Tensor& grad, Tensor& input_grad) override {
    grad_add_(input_grad.select(dim, index), grad);
    return true;
  }
  const char* name() const override { return "SelectBackward"; }
};

Tensor Tensor::select(int64_t d, int64_t index) const {
  auto i = static_cast<size_t>(existing_dim("select", d, shape()));
  const int64_t n = shape()[i];
  if (index < -n || index >= n)
    throw IndexError(
        fmt::format("select: index {} is out of range for dim {} of size {} (shape {})", index, d,
                    n, shape_str(shape())));
  if (index < 0) index += n;
  Shape s = shape(), st = strides();
  s.erase(s.begin() + static_cast<int64_t>(i));
  st.erase(st.begin() + static_cast<int64_t>(i));
  Tensor y = make_view(*this, s, st, offset() + index * strides()[i]);
  if (auto node = make_node<SelectBackward>({this}, shape(), static_cast<int64_t>(i), index))
    set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// expand
//   forward:   y = x broadcast to shape (stride 0 on expanded dims)
//   backward:  grad_x = sum_to(grad, x.shape)
struct ExpandBackward final : Node {
  Shape input_shape;
  explicit ExpandBackward(Shape s) : input_shape(std::move(s)) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {sum_to(grad, input_shape)}; }
  const char* name() const override { return "ExpandBackward"; }
};

Tensor Tensor::expand(const Shape& requested) const {
  if (requested.size() < shape().size())
    throw ShapeError(fmt::format("expand: cannot expand shape {} to fewer dims {}",
                                 shape_str(shape()), shape_str(requested)));
  const size_t lead = requested.size() - shape().size();
  Shape s(requested.size()), st(requested.size(), 0);
  for (size_t i = 0; i < requested.size(); ++i) {
    if (i < lead) {
      if (requested[i] < 0)
        throw ShapeError(fmt::format("expand: -1 is not allowed in new leading dim {} of {}", i,
                                     shape_str(requested)));
      s[i] = requested[i];
      continue;
    }
    int64_t have = shape()[i - lead];
    int64_t want = requested[i] == -1 ? have : requested[i];
    if (want < 0)
      throw ShapeError(fmt::format("expand: invalid size {} at dim {} of {}", requested[i], i,
                                   shape_str(requested)));
    if (have == want) {
      s[i] = have;
      st[i] = strides()[i - lead];
    } else if (have == 1) {
      s[i] = want;
    } else {
      throw ShapeError(fmt::format("expand: shape {} cannot be expanded to {} (dim {})",
                                   shape_str(shape()), shape_str(requested), i));
    }
  }
  if (s == shape()) return *this;
  try {
    (void)shape_numel(s);  // every tensor's numel fits in int64
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("expand: shape {} of input {} has more than 2^63 - 1 elements",
                                 shape_str(requested), shape_str(shape())));
  }
  Tensor y = make_view(*this, s, st, offset());
  if (auto node = make_node<ExpandBackward>({this}, shape())) set_history(y, node);
  return y;
}

}  // namespace nabla
