// The out-of-line half of the instrumentation points: a per-thread stack of open events (for
// nesting and self time), and the hand-off of finished events to the tools that are on.
#include "nabla/core/inspect/instrument.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <unordered_set>

#include "nabla/core/allocator.h"
#include "nabla/core/autograd.h"
#include "nabla/core/broadcast.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/memory_ledger.h"
#include "nabla/core/inspect/profiler.h"
#include "nabla/core/inspect/trace.h"

namespace nabla::inspect {

namespace detail {

std::atomic<uint32_t> active_tools{0};

void set_tool(Tool tool, bool on) {
  if (on)
    active_tools.fetch_or(tool);
  else
    active_tools.fetch_and(~static_cast<uint32_t>(tool));
}

}  // namespace detail

namespace {

struct OpenEvent {
  const char* name = "";
  EventKind kind = EventKind::Op;
  int64_t start_ns = 0;
  int64_t child_ns = 0;
  uint64_t alloc_start = 0;
  uint64_t child_alloc = 0;
  int64_t flops = 0;
  uint64_t session = 0;  // the profiler session it belongs to; 0 when not profiled
  uint64_t id = 0;
  std::vector<Shape> shapes;
  DType dtype = kFloat32;
};

// The events open on this thread, outermost first. RAII scopes close them in reverse order.
thread_local std::vector<OpenEvent> open_events;

// Opens an event; `describe` fills its inputs (only when profiled). Returns its depth.
template <class F>
int32_t open_event(const char* name, EventKind kind, F&& describe) {
  OpenEvent e;
  e.name = name;
  e.kind = kind;
  e.session = detail::profile_session();
  if (e.session != 0) {
    e.id = detail::new_event_id();
    describe(e);
  }
  e.alloc_start = allocator::thread_allocated_bytes();
  open_events.push_back(std::move(e));
  open_events.back().start_ns = detail::now_ns();  // the bookkeeping above is not timed
  return static_cast<int32_t>(open_events.size() - 1);
}

// Closes the event at `slot` (the innermost one) and hands it to the tools that are on.
// Returns its duration.
int64_t close_event(int32_t slot) {
  const int64_t end = detail::now_ns();
  if (slot < 0 || static_cast<size_t>(slot) >= open_events.size()) return 0;
  OpenEvent e = std::move(open_events[static_cast<size_t>(slot)]);
  open_events.resize(static_cast<size_t>(slot));
  const int64_t duration = end - e.start_ns;
  const auto allocated = static_cast<int64_t>(allocator::thread_allocated_bytes() - e.alloc_start);
  bool flops_in_parent = false;
  if (slot > 0) {
    OpenEvent& parent = open_events.back();
    parent.child_ns += duration;
    parent.child_alloc += static_cast<uint64_t>(allocated);
    for (const OpenEvent& outer : open_events) flops_in_parent |= outer.flops > 0;
  }
  if (e.session != 0 && e.session == detail::profile_session()) {
    ProfileEvent pe;
    pe.name = e.name;
    pe.kind = e.kind;
    pe.input_shapes = std::move(e.shapes);
    pe.dtype = e.dtype;
    pe.flops = e.flops;
    pe.flops_in_parent = flops_in_parent;
    pe.bytes_allocated = allocated;
    pe.self_bytes_allocated = allocated - static_cast<int64_t>(e.child_alloc);
    pe.start_ns = e.start_ns;
    pe.duration_ns = duration;
    pe.self_ns = duration - e.child_ns;
    pe.thread = detail::thread_index();
    pe.id = e.id;
    pe.parent = slot > 0 && open_events.back().session == e.session ? open_events.back().id : 0;
    detail::record_profile_event(e.session, std::move(pe));
  }
  if (slot == 0 && e.kind != EventKind::Gemm && (detail::tools() & detail::kLedger)) {
    const Phase phase = e.kind == EventKind::Backward ? Phase::Backward
                        : GradMode::enabled()         ? Phase::Forward
                                                      : Phase::NoGrad;
    detail::ledger_point(e.name, phase);
  }
  return duration;
}

// Saved tensors read by the backward formulas running on this thread, while a traced node runs.
thread_local std::vector<std::pair<const void*, int64_t>> saved_reads;
thread_local int traced_nodes_running = 0;

double l2_norm(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return 0;
  Tensor c = t.detach().contiguous();
  return dispatch_floating(c.dtype(), "trace", [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data_ptr<T>();
    double sum = 0;
    for (int64_t i = 0; i < c.numel(); ++i) {
      const auto v = static_cast<double>(p[i]);
      sum += v * v;
    }
    return std::sqrt(sum);
  });
}

int64_t class_bytes(const Storage& s) {
  return static_cast<int64_t>(allocator::size_class(s.nbytes()));
}

}  // namespace

// --- OpScope, GemmScope ------------------------------------------------------------------------

void OpScope::open(const char* name, const Tensor* const* inputs, size_t n) {
  slot_ = open_event(name, EventKind::Op, [&](OpenEvent& e) {
    bool typed = false;
    for (size_t i = 0; i < n; ++i) {
      const Tensor* t = inputs[i];
      if (!t || !t->defined()) continue;
      e.shapes.push_back(t->shape());
      if (!typed) e.dtype = t->dtype();
      typed = true;
    }
  });
}

void OpScope::open_list(const char* name, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : inputs) pointers.push_back(&t);
  open(name, pointers.data(), pointers.size());
}

void OpScope::close() {
  close_event(slot_);
  slot_ = -1;
}

void OpScope::set_flops(int64_t flops) {
  if (static_cast<size_t>(slot_) < open_events.size())
    open_events[static_cast<size_t>(slot_)].flops = flops;
}

void GemmScope::open(int64_t m, int64_t n, int64_t k, DType dtype) {
  slot_ = open_event("gemm", EventKind::Gemm, [&](OpenEvent& e) {
    e.shapes = {{m, k}, {k, n}};
    e.dtype = dtype;
  });
  open_events.back().flops = 2 * m * n * k;
}

void GemmScope::close() {
  close_event(slot_);
  slot_ = -1;
}

// --- NodeWatch ---------------------------------------------------------------------------------

struct NodeWatch::State {
  Node* node = nullptr;
  int32_t slot = -1;  // its event, when the profiler or the ledger is on
  bool tracing = false;
  TraceOptions options;
  TraceRecord record;
  int64_t start_ns = 0;
  size_t reads_from = 0;
  // The node's saved storages before it ran: those gone after it are what it gave back.
  std::vector<std::pair<std::weak_ptr<Storage>, int64_t>> saved;
};

void NodeWatch::open(Node& node, const Tensor& grad) {
  const uint32_t tools = detail::tools();
  auto state = std::make_unique<State>();
  State& s = *state;
  s.node = &node;
  if ((tools & detail::kTrace) && detail::tracing_this_thread(&s.options)) {
    s.record.node = node.name();
    s.record.op = node.forward_op();
    s.record.sequence_nr = node.sequence_nr();
    s.record.grad_shape = grad.shape();
    s.record.grad_norm = l2_norm(grad);
    if (s.options.keep_gradients) s.record.grad = grad.detach().clone();
    std::unordered_set<const Storage*> seen;
    for (const SavedTensor* saved : node.saved_tensors()) {
      const auto& data = saved->peek();
      if (data && data->storage && seen.insert(data->storage.get()).second)
        s.saved.emplace_back(data->storage, class_bytes(*data->storage));
    }
    s.reads_from = saved_reads.size();
    s.tracing = true;
  }
  if (tools & (detail::kProfiler | detail::kLedger)) {
    s.slot = open_event(node.name(), EventKind::Backward, [&](OpenEvent& e) {
      e.shapes = node.input_shapes.to_vector();
      if (!node.input_dtypes.empty()) e.dtype = node.input_dtypes[0];
    });
    open_events.back().flops = node.backward_flops();
  }
  if (s.tracing) ++traced_nodes_running;  // nothing below throws
  state_ = state.release();
  state_->start_ns = detail::now_ns();
}

namespace {

// The gradient `node` sends to input i, as the engine will add it: summed down to the input's
// shape. A gradient the engine will reject (a shape that does not sum down) is left unmeasured
// for the engine to report.
SentGradient sent_gradient(const Node& node, size_t i, const std::vector<Tensor>& grads,
                           bool keep) {
  SentGradient sent;
  sent.shape = i < node.input_shapes.size() ? node.input_shapes[i] : Shape{};
  if (node.next[i].fn) sent.to = node.next[i].fn->name();
  if (i >= grads.size() || !grads[i].defined() || !node.next[i].fn) return sent;
  try {
    NoGradGuard no_grad;
    Tensor g = grads[i].detach();
    if (g.shape() != sent.shape) g = sum_to(g, sent.shape);
    sent.norm = l2_norm(g);
    if (keep) sent.value = g.clone();
    sent.sent = true;
  } catch (const Error&) {
    sent.sent = false;
  }
  return sent;
}

}  // namespace

void NodeWatch::finish(const std::vector<Tensor>& grads) {
  std::unique_ptr<State> state(state_);
  state_ = nullptr;
  State& s = *state;
  const int64_t end = detail::now_ns();
  if (s.slot >= 0) close_event(s.slot);
  if (!s.tracing) return;
  --traced_nodes_running;
  TraceRecord& r = s.record;
  const Node& node = *s.node;
  r.duration_ns = end - s.start_ns;
  r.into_buffer = grads.size() != node.next.size();
  std::unordered_set<const void*> read;
  for (size_t i = s.reads_from; i < saved_reads.size(); ++i)
    if (read.insert(saved_reads[i].first).second) r.saved_read_bytes += saved_reads[i].second;
  saved_reads.resize(s.reads_from);
  for (const auto& [storage, bytes] : s.saved)
    if (storage.expired()) r.saved_freed_bytes += bytes;
  for (size_t i = 0; i < node.next.size(); ++i)
    r.sent.push_back(sent_gradient(node, i, grads, s.options.keep_gradients));
  detail::record_trace(std::move(r));
}

void NodeWatch::abandon() {
  std::unique_ptr<State> state(state_);
  state_ = nullptr;
  if (state->slot >= 0) close_event(state->slot);
  if (state->tracing) {
    --traced_nodes_running;
    saved_reads.resize(std::min(saved_reads.size(), state->reads_from));
  }
}

// --- hooks in core/autograd.cpp ----------------------------------------------------------------

namespace detail {

void on_node_recorded(const std::shared_ptr<Node>& node) { ledger_node(node); }

void write_text_file(const char* who, const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw IOError(
        fmt::format("{}: cannot open '{}' for writing: {}", who, path, std::strerror(errno)));
  out << text;
  out.flush();
  if (!out)
    throw IOError(fmt::format("{}: writing '{}' failed: {}", who, path, std::strerror(errno)));
}

void on_saved_tensor_read(const TensorImpl& data) {
  if (traced_nodes_running == 0) return;
  // Keyed by the saved data: two fields saving one tensor (mul(h, h)) read it once.
  saved_reads.emplace_back(&data,
                           shape_numel(data.shape) * static_cast<int64_t>(dtype_size(data.dtype)));
}

}  // namespace detail
}  // namespace nabla::inspect
