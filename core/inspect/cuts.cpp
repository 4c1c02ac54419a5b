// CutRecorder: notes where gradient paths end, and explains afterwards (see cuts.h).
#include "nabla/core/inspect/cuts.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_set>
#include <utility>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/scope.h"

namespace nabla::inspect {

namespace detail {
constinit thread_local CutRecorder* cut_recorder = nullptr;
constinit thread_local CutRecorder* anomaly_recorder = nullptr;
}  // namespace detail

namespace {

// "TanhBackward" from the node type's mangled name (namespaces and template arguments dropped).
std::string node_type_name(const std::type_info& type) {
  int status = 0;
  char* raw = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && raw ? raw : type.name();
  std::free(raw);
  if (auto lt = name.find('<'); lt != std::string::npos) name.resize(lt);
  if (auto colon = name.rfind("::"); colon != std::string::npos) name = name.substr(colon + 2);
  return name;
}

std::string scope_phrase(bool has_scope, const std::string& scope) {
  if (!has_scope) return "";
  return scope.empty() ? " in the root module" : fmt::format(" in module '{}'", scope);
}

// The identity of a tensor's place in the graph: its grad_fn, or the leaf itself.
const void* graph_key(const Tensor& t) {
  return t.grad_fn() ? static_cast<const void*>(t.grad_fn().get())
                     : static_cast<const void*>(t.impl_ptr().get());
}

// Every leaf (AccumulateGrad) reachable from `root`, iteratively.
void collect_leaves(Node* root, std::vector<const TensorImpl*>& out) {
  std::unordered_set<Node*> seen{root};
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) out.push_back(acc->leaf().get());
    for (const Edge& e : n->next)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
}

}  // namespace

const char* cut_kind_name(CutKind kind) {
  switch (kind) {
    case CutKind::Detach:
      return "detach";
    case CutKind::NoGrad:
      return "no-grad mode";
    case CutKind::NonDifferentiable:
      return "non-differentiable op";
  }
  return "?";
}

std::string NonFiniteGradient::describe() const {
  return fmt::format(
      "first non-finite gradient: {} (forward op '{}'{}) produced it for its input {} of shape {}",
      node, forward_op, scope_phrase(has_scope, scope), input, shape_str(shape));
}

std::string NoGradientReason::describe() const {
  const std::string where = scope_phrase(has_scope, scope);
  switch (kind) {
    case Kind::Cut:
      switch (cut) {
        case CutKind::Detach:
          return fmt::format("its path was cut by detach(){}", where);
        case CutKind::NoGrad:
          return fmt::format("its path was cut by '{}'{}, which ran in no-grad mode (NoGradGuard)",
                             op, where);
        case CutKind::NonDifferentiable:
          return fmt::format("its path was cut by '{}'{}, which is not differentiable", op, where);
      }
      break;
    case Kind::NotReached:
      return fmt::format("'{}'{} read it, but no path from there reached the outputs", op, where);
    case Kind::Frozen:
      return "it does not require grad (frozen)";
    case Kind::NeverUsed:
      break;
  }
  return "no recorded op read it: the forward never used it";
}

// ----------------------------------------------------------------------------
// CutRecorder

CutRecorder::CutRecorder()
    : active_(true),
      previous_cut_(std::exchange(detail::cut_recorder, this)),
      previous_anomaly_(std::exchange(detail::anomaly_recorder, this)) {}

CutRecorder::~CutRecorder() { stop(); }

void CutRecorder::stop() {
  if (!active_) return;
  active_ = false;
  if (detail::cut_recorder == this) detail::cut_recorder = previous_cut_;
  if (detail::anomaly_recorder == this) detail::anomaly_recorder = previous_anomaly_;
}

void CutRecorder::add_cut(CutKind kind, std::string op, const std::type_info* node_type,
                          const Tensor& input) {
  Cut cut{kind,    std::move(op), node_type, current_module_scope(), input.grad_fn(),
          nullptr, next_order_++};
  if (!cut.source_fn) cut.source_leaf = input.impl_ptr();
  if (kind != CutKind::NoGrad) {
    // An op that detaches its input to read it and is itself not differentiable (argmax) is
    // noted twice: the op says more than the detach.
    auto [it, added] = pending_.try_emplace(graph_key(input), std::move(cut));
    if (!added && it->second.kind == CutKind::Detach && kind != CutKind::Detach)
      it->second = std::move(cut);
    return;
  }
  // One cut per source is enough to explain it: keeps a long no-grad loop from growing the list.
  for (const Cut& c : cuts_)
    if ((c.source_fn && c.source_fn == cut.source_fn) ||
        (c.source_leaf && c.source_leaf == cut.source_leaf))
      return;
  cuts_.push_back(std::move(cut));
}

std::vector<NoGradientReason> CutRecorder::explain(const std::vector<Tensor>& leaves) const {
  std::vector<NoGradientReason> out(leaves.size());
  std::unordered_map<const TensorImpl*, std::vector<size_t>> open;  // unexplained leaves
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].defined()) open[leaves[i].impl_ptr().get()].push_back(i);

  auto resolve = [&](const Cut& c) {
    std::vector<const TensorImpl*> found;
    if (c.source_leaf)
      found.push_back(c.source_leaf.get());
    else
      collect_leaves(c.source_fn.get(), found);
    for (const TensorImpl* leaf : found) {
      auto it = open.find(leaf);
      if (it == open.end()) continue;
      NoGradientReason r;
      r.kind = NoGradientReason::Kind::Cut;
      r.cut = c.kind;
      r.op = c.kind == CutKind::Detach ? "detach"
             : c.op.empty()            ? forward_op_name(node_type_name(*c.node_type))
                                       : c.op;
      r.has_scope = c.scope != nullptr;
      if (c.scope) r.scope = c.scope->path;
      for (size_t i : it->second) out[i] = r;
      open.erase(it);
    }
  };
  for (const Cut& c : cuts_) {
    if (open.empty()) break;
    resolve(c);
  }
  std::vector<const Cut*> pending;
  for (const auto& [key, c] : pending_) pending.push_back(&c);
  std::sort(pending.begin(), pending.end(),
            [](const Cut* a, const Cut* b) { return a->order < b->order; });
  for (const Cut* c : pending) {
    if (open.empty()) break;
    resolve(*c);
  }
  for (const auto& [leaf, indices] : open) {
    NoGradientReason r;
    if (auto it = uses_.find(leaf); it != uses_.end()) {
      r.kind = NoGradientReason::Kind::NotReached;
      r.op = it->second.op;
      r.has_scope = it->second.scope != nullptr;
      if (it->second.scope) r.scope = it->second.scope->path;
    }
    for (size_t i : indices) out[i] = r;
  }
  return out;
}

// ----------------------------------------------------------------------------
// the library's hooks

namespace detail {

void note_cut(CutKind kind, std::string op, std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) cut_recorder->add_cut(kind, op, nullptr, *t);
}

void note_no_grad_op(const std::type_info& node_type, std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad())
      cut_recorder->add_cut(CutKind::NoGrad, "", &node_type, *t);
}

void note_detach(const Tensor& source) {
  if (GradMode::enabled() && source.requires_grad())
    cut_recorder->add_cut(CutKind::Detach, "detach", nullptr, source);
}

void note_connect(const Node& node, std::initializer_list<const Tensor*> inputs) {
  CutRecorder& r = *cut_recorder;
  for (const Tensor* t : inputs) {
    if (!t || !t->defined() || !t->requires_grad()) continue;
    // The op that detached (or compared) this input to read it has now recorded it: the path
    // goes on, so that was not where it ended.
    if (!r.pending_.empty()) r.pending_.erase(graph_key(*t));
    if (t->is_leaf() && !r.uses_.count(t->impl_ptr().get()))
      r.uses_.emplace(t->impl_ptr().get(),
                      CutRecorder::Use{node.forward_op(), current_module_scope()});
  }
}

void note_non_finite(const Node& node, size_t input, const Tensor& grad) {
  CutRecorder& r = *anomaly_recorder;
  if (r.non_finite_) return;
  NonFiniteGradient nf;
  nf.node = node.name();
  nf.forward_op = node.forward_op();
  nf.has_scope = node.module_scope != nullptr;
  if (node.module_scope) nf.scope = node.module_scope->path;
  nf.sequence_nr = node.sequence_nr();
  nf.input = input;
  nf.shape = grad.shape();
  r.non_finite_ = std::move(nf);
}

}  // namespace detail
}  // namespace nabla::inspect
