// The memory ledger: classifies the allocator's live storages by walking what holds them.
#include "nabla/core/inspect/memory_ledger.h"
#include "nabla/core/inspect/scope.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "nabla/core/allocator.h"
#include "nabla/core/autograd.h"
#include "nabla/core/error.h"

namespace nabla::inspect {

struct MemoryLedger::State {
  std::vector<std::pair<std::string, Tensor>> parameters;
  std::function<std::vector<Tensor>()> optimizer_state;
  std::mutex nodes_mutex;
  std::vector<std::weak_ptr<Node>> nodes;  // recorded while recording; guarded by nodes_mutex
  bool recording = false;
  std::thread::id owner;
  MemoryTimeline timeline;
};

namespace {

std::mutex recording_mutex;
MemoryLedger::State* recording = nullptr;  // guarded by recording_mutex

// Counts each storage once, by its allocator size class (what live_bytes() counts).
class Claims {
 public:
  int64_t claim(const std::shared_ptr<Storage>& s) {
    if (!s || !seen_.insert(s.get()).second) return 0;
    return static_cast<int64_t>(allocator::size_class(s->nbytes()));
  }
  int64_t claim(const Tensor& t) { return t.defined() ? claim(t.storage()) : 0; }

 private:
  std::unordered_set<const Storage*> seen_;
};

// The module a node's forward ran in. Nodes do not carry a module scope yet: every node is
// grouped under "" until they do.
// The module whose forward recorded the node (core/inspect/scope.h); "" outside modules or when
// scopes were not recorded.
std::string module_of(const Node& node) {
  return node.module_scope ? node.module_scope->path : std::string();
}

std::string module_of_parameter(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

// Every node the ledger can see: those recorded while recording, those below `outputs`, and
// everything below them. Each is claimed for this thread in `uses` (core/graph_use.h): another
// thread running a node below `outputs` is an AutogradError; any other node it is running is
// skipped (its saved bytes count as "other" until it is done).
std::vector<std::shared_ptr<Node>> reachable_nodes(MemoryLedger::State& st,
                                                   const std::vector<Tensor>& outputs,
                                                   std::vector<NodeUse>& uses) {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<char> below_output;  // per node: reached from `outputs`
  std::unordered_set<const Node*> visited;
  auto visit = [&](std::shared_ptr<Node> n, bool required) {
    if (!n || visited.count(n.get())) return;
    NodeUse use;
    if (required)
      use.claim(*n, "MemoryLedger::snapshot");
    else if (!use.try_claim(*n))
      return;
    visited.insert(n.get());
    uses.push_back(std::move(use));
    nodes.push_back(std::move(n));
    below_output.push_back(required);
  };
  {
    std::lock_guard lock(st.nodes_mutex);
    std::erase_if(st.nodes, [](const std::weak_ptr<Node>& n) { return n.expired(); });
    for (const auto& n : st.nodes) visit(n.lock(), false);
  }
  for (const Tensor& out : outputs)
    if (out.defined()) visit(out.grad_fn(), true);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Edge& e : nodes[i]->next) visit(e.fn, below_output[i] != 0);
  return nodes;
}

MemoryCategories categorize(MemoryLedger::State& st, const std::vector<Tensor>& outputs,
                            MemorySnapshot* detail) {
  MemoryCategories c;
  Claims claims;
  std::map<std::string, size_t> module_row;
  for (const auto& [name, p] : st.parameters) {
    const int64_t param = claims.claim(p), grad = claims.claim(p.grad());
    c.parameters += param;
    c.gradients += grad;
    if (!detail) continue;
    auto [it, fresh] =
        module_row.try_emplace(module_of_parameter(name), detail->parameters_by_module.size());
    if (fresh) detail->parameters_by_module.push_back({it->first, 0, 0});
    detail->parameters_by_module[it->second].parameters += param;
    detail->parameters_by_module[it->second].gradients += grad;
  }
  if (st.optimizer_state)
    for (const Tensor& t : st.optimizer_state()) c.optimizer_state += claims.claim(t);
  std::map<std::pair<std::string, std::string>, SavedBytes> by_op;
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<NodeUse> uses;  // held while the saved tensors are read, released before `nodes`
  nodes = reachable_nodes(st, outputs, uses);
  for (const auto& node : nodes) {
    int64_t bytes = 0;
    bool holds = false;  // a node whose storages another node or category claimed still counts
    for (const SavedTensor* saved : node->saved_tensors()) {
      if (!saved->peek()) continue;
      holds = true;
      bytes += claims.claim(saved->peek()->storage);
    }
    c.saved_activations += bytes;
    if (!detail || !holds) continue;
    SavedBytes& row = by_op[{node->forward_op(), module_of(*node)}];
    row.op = node->forward_op();
    row.module = module_of(*node);
    ++row.nodes;
    row.bytes += bytes;
  }
  const auto live = static_cast<int64_t>(allocator::live_bytes());
  c.other = live - c.parameters - c.gradients - c.optimizer_state - c.saved_activations;
  c.idle_cache = static_cast<int64_t>(allocator::idle_cache_bytes());
  if (detail) {
    detail->allocator_live = live;
    for (auto& [key, row] : by_op) detail->saved_by_op.push_back(std::move(row));
    std::stable_sort(detail->saved_by_op.begin(), detail->saved_by_op.end(),
                     [](const SavedBytes& a, const SavedBytes& b) { return a.bytes > b.bytes; });
  }
  return c;
}

std::string mb(int64_t bytes) { return fmt::format("{:.3f}", static_cast<double>(bytes) / 1e6); }

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::Forward:
      return "forward";
    case Phase::Backward:
      return "backward";
    case Phase::NoGrad:
      return "no_grad";
  }
  return "forward";
}

// --- MemoryLedger --------------------------------------------------------------------------------

MemoryLedger::MemoryLedger() : state_(std::make_unique<State>()) {}

MemoryLedger::~MemoryLedger() {
  if (state_->recording) stop();
}

void MemoryLedger::track_parameters(const std::vector<std::pair<std::string, Tensor>>& named) {
  for (const auto& p : named) state_->parameters.push_back(p);
}

void MemoryLedger::track_optimizer_state(std::function<std::vector<Tensor>()> state) {
  state_->optimizer_state = std::move(state);
}

MemorySnapshot MemoryLedger::snapshot(const std::vector<Tensor>& outputs) const {
  MemorySnapshot s;
  s.bytes = categorize(*state_, outputs, &s);
  return s;
}

void MemoryLedger::start() {
  std::lock_guard lock(recording_mutex);
  if (recording)
    throw Error("MemoryLedger::start: a memory ledger is already recording; stop() it first");
  State& st = *state_;
  st.recording = true;
  st.owner = std::this_thread::get_id();
  st.timeline = MemoryTimeline();
  st.timeline.start_live_bytes = static_cast<int64_t>(allocator::live_bytes());
  allocator::start_peak_watch();
  recording = &st;
  detail::set_tool(detail::kLedger, true);
}

MemoryTimeline MemoryLedger::stop() {
  std::lock_guard lock(recording_mutex);
  if (!state_->recording) throw Error("MemoryLedger::stop: the ledger is not recording");
  detail::set_tool(detail::kLedger, false);
  recording = nullptr;
  state_->recording = false;
  state_->timeline.peak_live_bytes = static_cast<int64_t>(allocator::peak_live_bytes());
  allocator::stop_peak_watch();
  return std::move(state_->timeline);
}

namespace detail {

void ledger_point(const char* op, Phase phase) {
  // An op run by the optimizer-state callback inside the point must not record one itself.
  thread_local bool in_point = false;
  if (in_point) return;
  in_point = true;
  struct Reset {
    ~Reset() { in_point = false; }
  } reset;
  std::lock_guard lock(recording_mutex);
  if (!recording || recording->owner != std::this_thread::get_id()) return;
  TimelinePoint p;
  p.index = static_cast<int64_t>(recording->timeline.points.size());
  p.op = op;
  p.phase = phase;
  p.bytes = categorize(*recording, {}, nullptr);
  recording->timeline.points.push_back(std::move(p));
}

void ledger_node(const std::shared_ptr<Node>& node) {
  std::lock_guard lock(recording_mutex);
  // Only the recording thread's nodes: another thread's graph is its own to run.
  if (!recording || recording->owner != std::this_thread::get_id()) return;
  std::lock_guard nodes_lock(recording->nodes_mutex);
  recording->nodes.push_back(node);
}

}  // namespace detail

// --- printing ------------------------------------------------------------------------------------

std::string MemorySnapshot::table() const {
  const MemoryCategories& c = bytes;
  std::string out = fmt::format("{:<18}  {:>10}\n", "category", "MB");
  const std::pair<const char*, int64_t> rows[] = {{"parameters", c.parameters},
                                                  {"gradients", c.gradients},
                                                  {"optimizer state", c.optimizer_state},
                                                  {"saved activations", c.saved_activations},
                                                  {"other", c.other},
                                                  {"live (allocator)", allocator_live},
                                                  {"idle cache", c.idle_cache}};
  for (const auto& [name, b] : rows) out += fmt::format("{:<18}  {:>10}\n", name, mb(b));
  if (!saved_by_op.empty()) {
    out += "saved activations by op:\n";
    auto label = [](const SavedBytes& s) {
      return s.module.empty() ? s.op : s.module + "/" + s.op;
    };
    size_t width = 0;
    for (const SavedBytes& s : saved_by_op) width = std::max(width, label(s).size());
    for (const SavedBytes& s : saved_by_op)
      out +=
          fmt::format("  {:<{}}  {:>5} nodes  {:>10} MB\n", label(s), width, s.nodes, mb(s.bytes));
  }
  return out;
}

std::string MemoryTimeline::csv() const {
  std::string out =
      "index,phase,op,parameters,gradients,optimizer_state,saved_activations,other,idle_cache,"
      "live\n";
  for (const TimelinePoint& p : points) {
    const MemoryCategories& c = p.bytes;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", p.index, phase_name(p.phase), p.op,
                       c.parameters, c.gradients, c.optimizer_state, c.saved_activations, c.other,
                       c.idle_cache, c.live());
  }
  return out;
}

void MemoryTimeline::write_csv(const std::string& path) const {
  detail::write_text_file("MemoryTimeline::write_csv", path, csv());
}

}  // namespace nabla::inspect
