// Arithmetic ops. Backward formulas return gradients in the output's (broadcast) shape; the
// engine sums them down to each input's shape.
#include "nabla/ops/arithmetic.h"

#include <cmath>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernel_helpers.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduced_float.h"
#include "nabla/ops/unary.h"

namespace nabla {

using kernels::scalar_like;

// ----------------------------------------------------------------------------
// add
//   forward:   y = a + b
//   backward:  grad_a = grad, grad_b = grad
struct AddBackward final : Node {
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad, grad}; }
  const char* name() const override { return "AddBackward"; }
};

Tensor add(const Tensor& a, const Tensor& b) {
  if (reduced::any(a, b))
    return reduced::in_float32(
        "add", [](const Tensor& a32, const Tensor& b32) { return add(a32, b32); }, a, b);
  inspect::OpScope op_scope("add", {&a, &b});
  Tensor y = kernels::map_binary_numeric("add", a, b, [](auto x, auto z) { return x + z; });
  if (auto node = make_node<AddBackward>({&a, &b})) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// sub
//   forward:   y = a - b
//   backward:  grad_a = grad, grad_b = -grad
struct SubBackward final : Node {
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {grad, needs_input_grad(1) ? neg(grad) : Tensor()};
  }
  const char* name() const override { return "SubBackward"; }
};

Tensor sub(const Tensor& a, const Tensor& b) {
  if (reduced::any(a, b))
    return reduced::in_float32(
        "sub", [](const Tensor& a32, const Tensor& b32) { return sub(a32, b32); }, a, b);
  inspect::OpScope op_scope("sub", {&a, &b});
  Tensor y = kernels::map_binary_numeric("sub", a, b, [](auto x, auto z) { return x - z; });
  if (auto node = make_node<SubBackward>({&a, &b})) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// mul
//   forward:   y = a * b
//   backward:  grad_a = grad * b, grad_b = grad * a     saves a only if b needs grad, and v.v.
struct MulBackward final : Node {
  SavedTensor a{this, "a"}, b{this, "b"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    return {needs_input_grad(0) ? mul(grad, b.get()) : Tensor(),
            needs_input_grad(1) ? mul(grad, a.get()) : Tensor()};
  }
  const char* name() const override { return "MulBackward"; }
};

Tensor mul(const Tensor& a, const Tensor& b) {
  if (reduced::any(a, b))
    return reduced::in_float32(
        "mul", [](const Tensor& a32, const Tensor& b32) { return mul(a32, b32); }, a, b);
  inspect::OpScope op_scope("mul", {&a, &b});
  Tensor y = kernels::map_binary_numeric("mul", a, b, [](auto x, auto z) { return x * z; });
  if (auto node = make_node<MulBackward>({&a, &b})) {
    if (node->needs_input_grad(0)) node->b.save(b);
    if (node->needs_input_grad(1)) node->a.save(a);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// div
//   forward:   y = a / b
//   backward:  grad_a = grad / b, grad_b = -grad * y / b      saves b, and y if b needs grad
struct DivBackward final : Node {
  SavedTensor b{this, "b"}, y{this, "y"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor bv = b.get();
    Tensor grad_a = needs_input_grad(0) ? div(grad, bv) : Tensor();
    Tensor grad_b = needs_input_grad(1) ? neg(div(mul(grad, y.get()), bv)) : Tensor();
    return {grad_a, grad_b};
  }
  const char* name() const override { return "DivBackward"; }
};

Tensor div(const Tensor& a, const Tensor& b) {
  if (reduced::any(a, b))
    return reduced::in_float32(
        "div", [](const Tensor& a32, const Tensor& b32) { return div(a32, b32); }, a, b);
  inspect::OpScope op_scope("div", {&a, &b});
  // Float only: int64 / int64 would truncate (PyTorch divides truly) and trap on a zero divisor.
  Tensor y = kernels::map_binary_float("div", a, b, [](auto x, auto z) { return x / z; });
  if (auto node = make_node<DivBackward>({&a, &b})) {
    node->b.save(b);
    if (node->needs_input_grad(1)) node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// neg
//   forward:   y = -x
//   backward:  grad_x = -grad
struct NegBackward final : Node {
  std::vector<Tensor> backward(const Tensor& grad) override { return {neg(grad)}; }
  const char* name() const override { return "NegBackward"; }
};

Tensor neg(const Tensor& x) {
  if (reduced::any(x))
    return reduced::in_float32(
        "neg", [](const Tensor& x32) { return neg(x32); }, x);
  inspect::OpScope op_scope("neg", {&x});
  Tensor y = kernels::map_unary<false>("neg", x, [](auto v) { return -v; });
  if (auto node = make_node<NegBackward>({&x})) set_history(y, node);
  return y;
}

// ----------------------------------------------------------------------------
// pow (tensor ^ scalar)
//   forward:   y = x^p
//   backward:  grad_x = grad * p * x^(p-1)      saves x
struct PowScalarBackward final : Node {
  SavedTensor x{this, "x"};
  double p;
  explicit PowScalarBackward(double e) : p(e) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    if (p == 0.0) return {mul(grad, 0.0)};
    return {mul(grad, mul(pow(x.get(), p - 1.0), p))};
  }
  const char* name() const override { return "PowScalarBackward"; }
};

Tensor pow(const Tensor& x, double p) {
  if (reduced::any(x))
    return reduced::in_float32(
        "pow", [p](const Tensor& x32) { return pow(x32, p); }, x);
  inspect::OpScope op_scope("pow", {&x});
  Tensor y = kernels::map_float("pow", x, [p](auto v) {
    using T = decltype(v);
    return p == 2.0 ? v * v : static_cast<T>(std::pow(v, static_cast<T>(p)));
  });
  if (auto node = make_node<PowScalarBackward>({&x}, p)) {
    node->x.save(x);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// pow (tensor ^ tensor)
//   forward:   y = x^e
//   backward:  grad_x = grad * e * x^(e-1),  grad_e = grad * y * log(x)     saves x, e, y
struct PowBackward final : Node {
  SavedTensor x{this, "x"}, e{this, "e"}, y{this, "y"};
  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor grad_x, grad_e;
    if (needs_input_grad(0)) grad_x = mul(grad, mul(e.get(), pow(x.get(), sub(e.get(), 1.0))));
    if (needs_input_grad(1)) grad_e = mul(grad, mul(y.get(), log(x.get())));
    return {grad_x, grad_e};
  }
  const char* name() const override { return "PowBackward"; }
};

Tensor pow(const Tensor& x, const Tensor& e) {
  if (reduced::any(x, e))
    return reduced::in_float32(
        "pow", [](const Tensor& x32, const Tensor& e32) { return pow(x32, e32); }, x, e);
  inspect::OpScope op_scope("pow", {&x, &e});
  Tensor y = kernels::map_binary_float("pow", x, e, [](auto a, auto b) { return std::pow(a, b); });
  if (auto node = make_node<PowBackward>({&x, &e})) {
    node->x.save(x);
    node->e.save(e);
    if (node->needs_input_grad(1)) node->y.save(y, /*is_output=*/true);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// scalar forms: the scalar becomes a 0-d tensor of x's dtype (no gradient flows to it). On a
// bfloat16/float16 x it stays a float32 scalar of the float32 computation (PyTorch's opmath), so
// it is not rounded to x's dtype first; the result is x's dtype, as PyTorch's.
namespace {
template <class Op>
Tensor tensor_scalar(const char* op, const Tensor& a, double b, Op&& fn) {
  if (reduced::any(a))
    return reduced::in_float32(
        op, [&](const Tensor& a32) { return fn(a32, scalar_like(op, a32, b)); }, a);
  return fn(a, scalar_like(op, a, b));
}
template <class Op>
Tensor scalar_tensor_op(const char* op, double a, const Tensor& b, Op&& fn) {
  if (reduced::any(b))
    return reduced::in_float32(
        op, [&](const Tensor& b32) { return fn(scalar_like(op, b32, a), b32); }, b);
  return fn(scalar_like(op, b, a), b);
}
Tensor add_t(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub_t(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor mul_t(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor div_t(const Tensor& a, const Tensor& b) { return div(a, b); }
}  // namespace

Tensor add(const Tensor& a, double b) { return tensor_scalar("add", a, b, add_t); }
Tensor sub(const Tensor& a, double b) { return tensor_scalar("sub", a, b, sub_t); }
Tensor mul(const Tensor& a, double b) { return tensor_scalar("mul", a, b, mul_t); }
Tensor div(const Tensor& a, double b) { return tensor_scalar("div", a, b, div_t); }
Tensor operator/(double a, const Tensor& b) { return scalar_tensor_op("div", a, b, div_t); }
// Scalar-first forms, as torch.sub(1.0, x) etc.: the scalar becomes a 0-d tensor of b's dtype.
Tensor add(double a, const Tensor& b) { return scalar_tensor_op("add", a, b, add_t); }
Tensor sub(double a, const Tensor& b) { return scalar_tensor_op("sub", a, b, sub_t); }
Tensor mul(double a, const Tensor& b) { return scalar_tensor_op("mul", a, b, mul_t); }
Tensor div(double a, const Tensor& b) { return scalar_tensor_op("div", a, b, div_t); }

// ----------------------------------------------------------------------------
// pow (scalar ^ tensor)
//   forward:   y = base^e
//   backward:  grad_e = grad * y * ln(base); 0 where base = 0 and e >= 0 (PyTorch's
//              pow_backward_exponent, tools/autograd/FunctionsManual.cpp)      saves y (and e)
struct PowScalarBaseBackward final : Node {
  SavedTensor y{this, "y"}, e{this, "e"};
  double base;
  explicit PowScalarBaseBackward(double b) : base(b) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    if (base == 0.0) return {where(ge(e.get(), 0.0), 0.0, mul(grad, mul(y.get(), -INFINITY)))};
    return {mul(grad, mul(y.get(), std::log(base)))};
  }
  const char* name() const override { return "PowScalarBaseBackward"; }
};

Tensor pow(double base, const Tensor& e) {
  if (reduced::any(e))
    return reduced::in_float32(
        "pow", [base](const Tensor& e32) { return pow(base, e32); }, e);
  inspect::OpScope op_scope("pow", {&e});
  Tensor y = kernels::map_float("pow", e, [base](auto v) {
    using T = decltype(v);
    return static_cast<T>(std::pow(static_cast<T>(base), v));
  });
  if (auto node = make_node<PowScalarBaseBackward>({&e}, base)) {
    node->y.save(y, /*is_output=*/true);
    if (base == 0.0) node->e.save(e);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// in-place forms: compute out of place, write back into self's storage, and (under grad mode)
// make the recorded node self's new history.
namespace {

template <class Op>
Tensor& inplace(const char* op, Tensor& self, const Tensor& other, Op&& fn,
                bool float_only = false) {
  kernels::check_same_dtype(op, self, other);
  auto no_kernel = [](auto) {};
  if (is_reduced_float(self.dtype())) {
    // computed by the out-of-place op in float32, rounded once into self
  } else if (float_only) {
    dispatch_float(self.dtype(), op, no_kernel);
  } else {
    dispatch_numeric(self.dtype(), op, no_kernel);
  }
  const bool record = GradMode::enabled() && (self.requires_grad() || other.requires_grad());
  if (record && self.requires_grad() && self.is_leaf())
    throw AutogradError(fmt::format(
        "{}: a leaf tensor that requires grad (shape {}) cannot be modified in place under grad "
        "mode; wrap the update in NoGradGuard",
        op, shape_str(self.shape())));
  if (record && self.is_view())
    throw AutogradError(fmt::format(
        "{}: in-place modification of a view (shape {}) while recording gradients is not "
        "supported; use the out-of-place op",
        op, shape_str(self.shape())));
  if (broadcast_shapes(op, self.shape(), other.shape()) != self.shape())
    throw ShapeError(fmt::format("{}: other of shape {} does not broadcast to self's shape {}", op,
                                 shape_str(other.shape()), shape_str(self.shape())));
  // A recorded op may save its input (mul saves self for other's gradient), and self is about
  // to be overwritten: it computes on a copy, so the saved tensor stays valid.
  Tensor result = fn(record ? self.clone() : self, other);
  {
    NoGradGuard no_grad;
    Tensor target = self.detach();
    target.copy_(result.detach());
  }
  if (record) set_history(self, result.grad_fn());
  return self;
}

}  // namespace

Tensor& add_(Tensor& self, const Tensor& other) {
  inspect::OpScope op_scope("add_", {&self, &other});
  return inplace("add_", self, other, [](const Tensor& a, const Tensor& b) { return add(a, b); });
}
Tensor& sub_(Tensor& self, const Tensor& other) {
  inspect::OpScope op_scope("sub_", {&self, &other});
  return inplace("sub_", self, other, [](const Tensor& a, const Tensor& b) { return sub(a, b); });
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  inspect::OpScope op_scope("mul_", {&self, &other});
  return inplace("mul_", self, other, [](const Tensor& a, const Tensor& b) { return mul(a, b); });
}
Tensor& div_(Tensor& self, const Tensor& other) {
  inspect::OpScope op_scope("div_", {&self, &other});
  return inplace(
      "div_", self, other, [](const Tensor& a, const Tensor& b) { return div(a, b); }, true);
}
Tensor& add_(Tensor& self, double other) { return add_(self, scalar_like("add_", self, other)); }
Tensor& mul_(Tensor& self, double other) { return mul_(self, scalar_like("mul_", self, other)); }

}  // namespace nabla
