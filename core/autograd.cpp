// Node, SavedTensor, grad mode, and the helpers ops use to record themselves.
#include "nabla/core/autograd.h"

#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <thread>

#include "nabla/core/inspect/instrument.h"
#include "nabla/core/inspect/scope.h"
#include "nabla/core/live_objects.h"
#include "nabla/core/saved_tensor_hooks.h"
#include "nabla/core/strided_loop.h"

namespace nabla {

namespace {
thread_local bool grad_mode_enabled = true;
std::atomic<bool> anomaly_enabled{false};
std::atomic<uint64_t> next_sequence_nr{0};
}  // namespace

bool GradMode::enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool on) { grad_mode_enabled = on; }
bool AnomalyMode::enabled() { return anomaly_enabled.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool on) { anomaly_enabled.store(on); }
bool anomaly_checks_enabled() { return AnomalyMode::enabled() || inspect::recording_non_finite(); }

void on_non_finite_gradient(const Node& node, size_t input, const Tensor& grad) {
  if (inspect::recording_non_finite()) inspect::detail::note_non_finite(node, input, grad);
  if (!AnomalyMode::enabled()) return;
  std::string scope;
  if (node.module_scope) scope = fmt::format(", module '{}'", node.module_scope->display());
  throw AutogradError(fmt::format(
      "anomaly: {} (forward op '{}'{}, sequence #{}) produced a non-finite gradient for its "
      "input {} of shape {}",
      node.name(), node.forward_op(), scope, node.sequence_nr(), input, shape_str(grad.shape())));
}

// ----------------------------------------------------------------------------
// Node

// module_scope: a null pointer copy unless a module scope is being recorded (nn/inspect.h).
Node::Node()
    : module_scope(inspect::current_module_scope()),
      sequence_nr_(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  detail::count_live(detail::kLiveNodes, 1);
}

Node::~Node() {
  detail::count_live(detail::kLiveNodes, -1);
  // Destroying the last handle of a long graph would recurse once per node (a 200k-op chain
  // overflows the stack). Instead the outermost destructor drains a worklist of children.
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (Edge& e : next)
    if (e.fn) pending.push_back(std::move(e.fn));
  next.clear();
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may push that node's children
  }
  draining = false;
}

std::string Node::forward_op() const { return forward_op_name(name()); }

std::string forward_op_name(const std::string& node_name) {
  std::string n = node_name;
  if (n.size() > 8 && n.compare(n.size() - 8, 8, "Backward") == 0) n.resize(n.size() - 8);
  std::string out;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

void Node::release_saved() {
  for (SavedTensor* s : saved_) s->release();
}

// ----------------------------------------------------------------------------
// SavedTensor

SavedTensor::SavedTensor(Node* owner, const char* name) : owner_(owner), name_(name) {
  owner_->saved_.push_back(this);
}

void SavedTensor::save(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  if (SavedTensorHooks* hooks = current_saved_tensor_hooks()) {  // checkpointing
    packed_ = hooks->pack(*owner_, t, is_output);
    if (packed_) return;  // null: saved as usual
  }
  version_ = t.storage()->version();
  is_output_ = is_output;
  if (is_output) {
    // Keep the data, not the autograd link: the output's grad_fn is our owner.
    data_ = t.data_view().impl_ptr();
    output_fn_ = owner_->weak_from_this();
  } else {
    data_ = t.impl_ptr();
  }
}

void SavedTensor::release() {
  if (data_ || packed_) released_ = true;
  data_.reset();
  packed_.reset();
}

Tensor SavedTensor::get() const {
  if (released_)
    throw AutogradError(fmt::format(
        "{}: trying to backward through the graph a second time (its saved tensors were freed "
        "after the first backward); pass retain_graph=true to the first backward",
        owner_->name()));
  if (packed_) return packed_->unpack();
  if (!data_) return Tensor();
  if (data_->storage->version() != version_)
    throw AutogradError(fmt::format(
        "{} (forward op '{}'): a tensor of shape {} saved for backward was modified by an "
        "in-place operation (version {}, expected {})",
        owner_->name(), owner_->forward_op(), shape_str(data_->shape), data_->storage->version(),
        version_));
  inspect::saved_tensor_read(*data_);
  if (!is_output_) return Tensor(data_);
  // Rebuild the output with its history so create_graph can differentiate through it.
  auto impl = std::make_shared<TensorImpl>(*data_);
  if (auto fn = output_fn_.lock()) {
    impl->grad_fn = fn;
    impl->requires_grad = true;
  }
  return Tensor(impl);
}

// ----------------------------------------------------------------------------
// recording helpers

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  if (t.grad_fn()) return t.grad_fn();
  // Threads recording with one leaf (a shared parameter) create its accumulator once. A spin
  // lock: this runs for every leaf input of every recorded op, and its section is a few loads.
  static std::atomic_flag accumulator_lock;
  while (accumulator_lock.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  struct Unlock {
    ~Unlock() { accumulator_lock.clear(std::memory_order_release); }
  } unlock;
  TensorImpl& impl = t.impl();
  auto acc = impl.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl.grad_accumulator = acc;
  }
  return acc;
}

void connect_inputs(Node& node, std::initializer_list<const Tensor*> inputs) {
  if (inspect::recording_cuts()) inspect::detail::note_connect(node, inputs);
  node.next.reserve(inputs.size());
  node.input_shapes.reserve(inputs.size());
  node.input_dtypes.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    node.next.push_back(Edge{t ? gradient_edge(*t) : nullptr});
    node.input_shapes.push_back(t && t->defined() ? t->shape() : Shape{});
    node.input_dtypes.push_back(t && t->defined() ? t->dtype() : kFloat32);
  }
}

void set_history(Tensor& output, std::shared_ptr<Node> node) {
  TensorImpl& impl = output.impl();
  impl.requires_grad = true;
  impl.grad_fn = std::move(node);
  inspect::node_recorded(impl.grad_fn);
}

// ----------------------------------------------------------------------------
// grad_sum: the engine's own op for summing two gradients of one tensor
//   forward:   y = a + b   (same shape and dtype)
//   backward:  grad_a = grad, grad_b = grad
struct GradSumBackward final : Node {
  std::vector<Tensor> backward(const Tensor& grad) override { return {grad, grad}; }
  const char* name() const override { return "GradSumBackward"; }
};

Tensor grad_sum(const Tensor& a, const Tensor& b) {
  Tensor y = empty(a.shape(), a.dtype());
  std::array<Shape, 3> st = {y.strides(), a.strides(), b.strides()};
  dispatch_floating(a.dtype(), "grad_sum", [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.data_ptr<T>();
    const T* ap = a.data_ptr<T>();
    const T* bp = b.data_ptr<T>();
    strided_for_each<3>(
        a.shape(), st, 1,
        [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
          for (int64_t i = 0; i < n; ++i)
            yp[o[0] + i * s[0]] = static_cast<T>(ap[o[1] + i * s[1]] + bp[o[2] + i * s[2]]);
        });
  });
  if (auto node = make_node<GradSumBackward>({&a, &b})) set_history(y, node);
  return y;
}

bool exclusively_owned(const Tensor& t) {
  return t.defined() && t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1;
}

void grad_add_(const Tensor& dst, const Tensor& src) {
  std::array<Shape, 2> st = {dst.strides(), src.strides()};
  dispatch_floating(dst.dtype(), "grad_add_", [&](auto tag) {
    using T = decltype(tag);
    T* dp = dst.data_ptr<T>();
    const T* sp = src.data_ptr<T>();
    strided_for_each<2>(
        dst.shape(), st, 1,
        [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
          for (int64_t i = 0; i < n; ++i) {
            T& d = dp[o[0] + i * s[0]];
            d = static_cast<T>(d + sp[o[1] + i * s[1]]);  // bfloat16/float16: one rounding
          }
        });
  });
  dst.storage()->bump_version();
}

// ----------------------------------------------------------------------------
// AccumulateGrad

std::vector<Tensor> AccumulateGrad::backward(const Tensor& incoming) {
  Tensor grad = incoming;
  for (const GradHook& hook : leaf_->leaf_hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  Tensor prev(leaf_->grad);
  if (GradMode::enabled()) {
    // create_graph: keep the gradient's own history so it can be differentiated again.
    leaf_->grad = (prev.defined() ? grad_sum(prev, grad) : grad).impl_ptr();
  } else if (!prev.defined()) {
    // Own the storage: another leaf may have received this very tensor.
    leaf_->grad = grad.clone().impl_ptr();
  } else {
    leaf_->grad = grad_sum(prev.detach(), grad).impl_ptr();
  }
  return {};
}

}  // namespace nabla
