// Tensor metadata, element access, conversion, in-place fill/copy and the autograd entry points.
#include "nabla/core/tensor.h"

#include <fmt/format.h>

#include <cstring>

#include "nabla/core/autograd.h"
#include "nabla/core/copy.h"
#include "nabla/core/error.h"

namespace nabla {

void Tensor::throw_undefined() { throw ValueError("use of an undefined Tensor"); }

// The C++ element type and the constant naming each dtype, for messages that say what to call.
static const char* cpp_type_name(DType dt) {
  switch (dt) {
    case kFloat32:
      return "float";
    case kFloat64:
      return "double";
    case kInt64:
      return "int64_t";
    case kBool:
      return "bool";
    case kBFloat16:
      return "bfloat16";
    case kFloat16:
      return "float16";
  }
  return "?";
}
static const char* dtype_constant(DType dt) {
  switch (dt) {
    case kFloat32:
      return "kFloat32";
    case kFloat64:
      return "kFloat64";
    case kInt64:
      return "kInt64";
    case kBool:
      return "kBool";
    case kBFloat16:
      return "kBFloat16";
    case kFloat16:
      return "kFloat16";
  }
  return "?";
}

// `what` is the public call that asked (data_ptr, to_vector): names both dtypes and the two fixes.
static DTypeError element_type_mismatch(const char* what, const Tensor& t, DType requested) {
  return DTypeError(fmt::format(
      "Tensor::{}<{}>: the tensor is {} (shape {}), not {}; call {}<{}>() or convert first with "
      ".to({})",
      what, cpp_type_name(requested), dtype_name(t.dtype()), shape_str(t.shape()),
      dtype_name(requested), what, cpp_type_name(t.dtype()), dtype_constant(requested)));
}

void Tensor::throw_dtype_mismatch(DType requested) const {
  throw element_type_mismatch("data_ptr", *this, requested);
}

int64_t Tensor::size(int64_t d) const {
  return shape()[static_cast<size_t>(existing_dim("size", d, shape()))];
}

int64_t Tensor::stride(int64_t d) const {
  return strides()[static_cast<size_t>(existing_dim("stride", d, shape()))];
}

bool Tensor::is_contiguous() const {
  // No elements: any layout is contiguous (as PyTorch). Strides of size-0 dims are laid out as
  // for size 1, so the loop below would refuse a fresh (0, 0, 5) tensor.
  for (int64_t size : shape())
    if (size == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    if (__builtin_mul_overflow(expected, shape()[i], &expected)) return false;
  }
  return true;
}

template <class T>
T Tensor::item() const {
  if (numel() != 1)
    throw ValueError(fmt::format("item: tensor of shape {} has {} elements, expected 1",
                                 shape_str(shape()), numel()));
  // Converts from any dtype, like libtorch's item<T>().
  return dispatch_all(dtype(),
                      [&](auto tag) { return static_cast<T>(*data_ptr<decltype(tag)>()); });
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template bfloat16 Tensor::item<bfloat16>() const;
template float16 Tensor::item<float16>() const;

double Tensor::item() const { return item<double>(); }

template <class T>
std::vector<T> Tensor::to_vector() const {
  if (dtype() != dtype_of<T>()) throw element_type_mismatch("to_vector", *this, dtype_of<T>());
  Tensor c = detach().contiguous();
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;
template std::vector<float16> Tensor::to_vector<float16>() const;

// ----------------------------------------------------------------------------
// clone / contiguous
//   forward:   y = copy of x (contiguous)
//   backward:  grad_x = grad
struct CloneBackward final : Node {
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad}; }
  const char* name() const override { return "CloneBackward"; }
};

Tensor Tensor::clone() const {
  Tensor y = empty(shape(), dtype());
  copy_kernel(y, *this);
  if (auto node = make_node<CloneBackward>({this})) set_history(y, node);
  return y;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

// ----------------------------------------------------------------------------
// to(dtype)
//   forward:   y = x converted to dtype
//   backward:  grad_x = grad converted back to x's dtype (floating dtypes only)
struct ToBackward final : Node {
  DType src;
  explicit ToBackward(DType s) : src(s) {}
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad.to(src)}; }
  const char* name() const override { return "ToBackward"; }
};

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  if (!is_floating(dt) && inspect::recording_cuts())
    inspect::detail::note_cut(inspect::CutKind::NonDifferentiable,
                              std::string("to(") + dtype_name(dt) + ")", {this});
  Tensor y = empty(shape(), dt);
  copy_kernel(y, *this);
  if (is_floating(dt) && is_floating(dtype()))
    if (auto node = make_node<ToBackward>({this}, dtype())) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// In-place fill and copy. Not recorded: under grad mode they refuse a tensor that requires grad.
static void check_inplace_allowed(const char* op, const Tensor& t) {
  if (GradMode::enabled() && t.requires_grad())
    throw AutogradError(
        fmt::format("{}: in-place operation on a tensor that requires grad (shape {}); wrap it in "
                    "NoGradGuard or use an out-of-place op",
                    op, shape_str(t.shape())));
}

Tensor& Tensor::fill_(double value) {
  check_inplace_allowed("fill_", *this);
  check_value_fits("fill_", value, dtype());
  Tensor scalar = scalar_tensor(value, kFloat64);
  copy_kernel(*this, scalar);
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace_allowed("copy_", *this);
  broadcast_shapes("copy_", shape(), src.shape());
  if (broadcast_shapes("copy_", shape(), src.shape()) != shape())
    throw ShapeError(fmt::format("copy_: source of shape {} does not broadcast to {}",
                                 shape_str(src.shape()), shape_str(shape())));
  // Overlapping source and destination: copy through a temporary.
  Tensor s = src.storage() == storage() ? src.detach().clone() : src.detach();
  copy_kernel(*this, s);
  storage()->bump_version();
  return *this;
}

// ----------------------------------------------------------------------------
// Metadata changes in place, for code that owns the tensor (see tensor.h): the only writes to
// TensorImpl's fields outside core.

void reshape_fresh_(Tensor& fresh, const Shape& shape) {
  // (is_contiguous() is false for some empty tensors made contiguous: (2, 0) has strides (1, 1).)
  const bool contiguous = fresh.numel() == 0 || fresh.is_contiguous();
  if (!contiguous || fresh.grad_fn() || fresh.is_view())
    throw ValueError(fmt::format(
        "reshape_fresh_: expects a fresh contiguous result with no history, got shape {}{}",
        shape_str(fresh.shape()), fresh.grad_fn() ? " with a grad_fn" : ""));
  if (shape_numel(shape) != fresh.numel())
    throw ShapeError(fmt::format("reshape_fresh_: shape {} does not hold the {} elements of {}",
                                 shape_str(shape), fresh.numel(), shape_str(fresh.shape())));
  fresh.impl().shape = shape;
  fresh.impl().strides = contiguous_strides(shape);
}

void set_data_(Tensor& t, const Tensor& data) {
  TensorImpl& impl = t.impl();
  impl.storage = data.storage();
  impl.dtype = data.dtype();
  impl.shape = data.shape();
  impl.strides = data.strides();
  impl.offset = data.offset();
  impl.grad.reset();
}

// ----------------------------------------------------------------------------
// autograd entry points

Tensor& Tensor::requires_grad_(bool value) {
  if (!is_leaf())
    throw AutogradError(
        "requires_grad_: only leaf tensors can change requires_grad; use detach() first");
  if (value && !is_floating(dtype()))
    throw DTypeError(
        fmt::format("requires_grad_: only floating tensors can require gradients, got {}",
                    dtype_name(dtype())));
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined() && g.shape() != shape())
    throw ShapeError(fmt::format("set_grad: gradient of shape {} for a tensor of shape {}",
                                 shape_str(g.shape()), shape_str(shape())));
  impl().grad = g.impl_ptr();
}

Tensor Tensor::detach() const {
  if (inspect::recording_cuts()) inspect::detail::note_detach(*this);  // a gradient report
  return data_view();
}

Tensor Tensor::data_view() const {
  auto d = std::make_shared<TensorImpl>();
  d->storage = storage();
  d->dtype = dtype();
  d->shape = shape();
  d->strides = strides();
  d->offset = offset();
  return Tensor(d);
}

void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {grad}, retain_graph, create_graph);
}

void Tensor::register_hook(GradHook hook) const {
  if (!requires_grad()) throw AutogradError("register_hook: the tensor does not require grad");
  if (is_leaf())
    impl().leaf_hooks.push_back(std::move(hook));
  else
    grad_fn()->pre_hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  if (!requires_grad()) throw AutogradError("retain_grad: the tensor does not require grad");
  if (is_leaf()) return;
  std::weak_ptr<TensorImpl> weak = impl_;
  grad_fn()->pre_hooks.push_back([weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      NoGradGuard no_grad;
      Tensor prev(self->grad);
      self->grad = (prev.defined() ? grad_sum(prev, g) : g.clone()).impl_ptr();
    }
    return Tensor();
  });
}

}  // namespace nabla
