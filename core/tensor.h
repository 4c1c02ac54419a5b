// Tensor: a cheap handle to a TensorImpl (shape, strides, offset into a shared Storage, and the
// autograd metadata). Copies of a Tensor share data, as in PyTorch. Arithmetic lives in ops/ as
// free functions (nabla::add, operator+, nabla::sum, ...); this class holds what core owns:
// metadata, views, element access, conversion and the autograd entry points.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nabla/core/dtype.h"
#include "nabla/core/live_objects.h"
#include "nabla/core/shape.h"
#include "nabla/core/storage.h"

namespace nabla {

class Node;
class Tensor;

// A gradient hook: gets the incoming gradient, returns a replacement (or an undefined Tensor to
// keep it unchanged).
using GradHook = std::function<Tensor(const Tensor&)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements

  bool requires_grad = false;
  bool is_view = false;  // shares storage with a tensor that may have autograd history
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves only; owned by the graph
  std::vector<GradHook> leaf_hooks;      // leaves only; non-leaf hooks live on grad_fn
  [[no_unique_address]] detail::TensorImplCount live_count;  // live_objects().tensor_impls
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- metadata -------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  // Inline: every metadata read goes through it (a recorded add makes ~25 of them).
  TensorImpl& impl() const {
    if (!impl_) [[unlikely]]
      throw_undefined();
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }
  bool is_view() const { return impl().is_view; }  // shares storage with a tensor with history

  // Typed pointer to element [0, ..., 0]; throws DTypeError if T does not match.
  template <class T>
  T* data_ptr() const {
    if (dtype() != dtype_of<T>()) [[unlikely]]
      throw_dtype_mismatch(dtype_of<T>());
    return static_cast<T*>(storage()->data()) + offset();
  }

  // --- element access and conversion ---------------------------------------
  template <class T>
  T item() const;       // single-element tensor -> value
  double item() const;  // any dtype, as double
  template <class T>
  std::vector<T> to_vector() const;  // row-major copy; T must match the dtype
  Tensor to(DType dt) const;         // copy with conversion (differentiable between float dtypes)
  Tensor contiguous() const;         // self if already contiguous, else a differentiable copy
  Tensor clone() const;              // always a differentiable copy
  std::string to_string() const;     // PyTorch-like repr

  // --- views (share storage; differentiable) -------------------------------
  Tensor view(const Shape& shape) const;     // requires compatible strides; one -1 allowed
  Tensor reshape(const Shape& shape) const;  // view when possible, else copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;   // 2-D transpose (0-D and 1-D unchanged)
  Tensor mT() const;  // swap the last two dims
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a dim; size-1 dims get stride 0
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;

  // --- in-place (bump the version counter) ---------------------------------
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src; converts dtype

  // --- autograd -------------------------------------------------------------
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool value = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  Tensor grad() const;  // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  Tensor detach() const;  // shares storage, no history
  // detach() that a gradient report does not count as a cut: the engine's own saved data.
  Tensor data_view() const;
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  void register_hook(GradHook hook) const;
  void retain_grad() const;  // keep .grad on a non-leaf

 private:
  [[noreturn]] static void throw_undefined();
  [[noreturn]] void throw_dtype_mismatch(DType requested) const;
  std::shared_ptr<TensorImpl> impl_;
};

// --- metadata changes in place, for code that owns the tensor ------------------
// Gives `fresh`, a contiguous result a kernel just made (no history, not a view), a new shape of
// as many elements, in place: no new TensorImpl and no view node, so it stays an ordinary tensor
// that in-place ops may modify (linear computes (M, out) and returns (..., out)).
void reshape_fresh_(Tensor& fresh, const Shape& shape);
// Points t's TensorImpl at data's storage, dtype, shape, strides and offset and drops t.grad,
// which no longer fits; PyTorch's `t.data = data`. Every handle to t sees the new data (a module
// converting its parameters while an optimizer holds them).
void set_data_(Tensor& t, const Tensor& data);

// --- factories ---------------------------------------------------------------
class Generator;

Tensor empty(const Shape& shape, DType dt = kFloat32);  // uninitialised
Tensor zeros(const Shape& shape, DType dt = kFloat32);
Tensor ones(const Shape& shape, DType dt = kFloat32);
Tensor full(const Shape& shape, double value, DType dt = kFloat32);
Tensor scalar_tensor(double value, DType dt = kFloat32);  // 0-d
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor empty_like(const Tensor& t);
Tensor arange(double start, double end, double step = 1.0, DType dt = kInt64);
Tensor arange(int64_t end, DType dt = kInt64);
Tensor linspace(double start, double end, int64_t steps, DType dt = kFloat32);
Tensor rand(const Shape& shape, DType dt = kFloat32);
Tensor rand(const Shape& shape, Generator& gen, DType dt = kFloat32);
Tensor randn(const Shape& shape, DType dt = kFloat32);
Tensor randn(const Shape& shape, Generator& gen, DType dt = kFloat32);
Tensor randint(int64_t low, int64_t high, const Shape& shape);
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen);
Tensor randn_like(const Tensor& t);
Tensor rand_like(const Tensor& t);

// Copies `values` into a new tensor of `shape` (numel must match).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
// 1-D/2-D literals: tensor({1, 2, 3}), tensor({{1, 2}, {3, 4}}, kFloat64).
Tensor tensor(std::initializer_list<double> values, DType dt = kFloat32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dt = kFloat32);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace nabla
