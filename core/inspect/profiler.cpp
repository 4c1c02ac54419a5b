// The profiler's session (per-thread event buffers) and what a Profile computes from its events.
#include "nabla/core/inspect/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "nabla/core/error.h"

namespace nabla::inspect {
namespace {

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<ProfileEvent> events;
};

struct Session {
  uint64_t id = 0;
  int64_t start_ns = 0;
  int caller_thread = 0;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // guarded by sessions_mutex
};

std::atomic<uint64_t> current_session{0};  // 0: not profiling
std::atomic<uint64_t> last_session{0};
std::atomic<uint64_t> last_event_id{0};
std::atomic<int> thread_count{0};
std::mutex sessions_mutex;
std::shared_ptr<Session> active;  // guarded by sessions_mutex

// This thread's buffer in the session it last recorded into.
thread_local uint64_t buffer_session = 0;
thread_local std::shared_ptr<ThreadBuffer> buffer;

const char* kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::Op:
      return "op";
    case EventKind::Backward:
      return "backward";
    case EventKind::Gemm:
      return "gemm";
  }
  return "op";
}

std::string human_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (std::abs(b) >= 1 << 30) return fmt::format("{:.2f} GB", b / (1 << 30));
  if (std::abs(b) >= 1 << 20) return fmt::format("{:.2f} MB", b / (1 << 20));
  if (std::abs(b) >= 1 << 10) return fmt::format("{:.1f} KB", b / (1 << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace

namespace detail {

uint64_t profile_session() { return current_session.load(std::memory_order_relaxed); }

uint64_t new_event_id() { return last_event_id.fetch_add(1, std::memory_order_relaxed) + 1; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int thread_index() {
  thread_local const int index = thread_count.fetch_add(1);
  return index;
}

void record_profile_event(uint64_t session, ProfileEvent&& event) {
  if (buffer_session != session) {
    std::lock_guard lock(sessions_mutex);
    if (!active || active->id != session) return;  // stopped meanwhile
    buffer = std::make_shared<ThreadBuffer>();
    active->buffers.push_back(buffer);
    buffer_session = session;
  }
  std::lock_guard lock(buffer->mutex);
  buffer->events.push_back(std::move(event));
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_str(shapes[i]);
  return s + "]";
}

}  // namespace detail

// --- Profiler ----------------------------------------------------------------------------------

Profiler::Profiler() {
  std::lock_guard lock(sessions_mutex);
  if (active) throw Error("Profiler: another Profiler is already recording; stop() it first");
  active = std::make_shared<Session>();
  active->id = last_session.fetch_add(1) + 1;
  active->caller_thread = detail::thread_index();
  last_event_id.store(0);
  active->start_ns = detail::now_ns();
  current_session.store(active->id);
  detail::set_tool(detail::kProfiler, true);
}

Profiler::~Profiler() {
  if (running_) stop();
}

Profile Profiler::stop() {
  if (!running_) throw Error("Profiler::stop: the profiler was already stopped");
  running_ = false;
  const int64_t end = detail::now_ns();
  detail::set_tool(detail::kProfiler, false);
  current_session.store(0);
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(sessions_mutex);
    session = std::move(active);
  }
  Profile profile;
  profile.wall_ns = end - session->start_ns;
  profile.caller_thread = session->caller_thread;
  for (const auto& b : session->buffers) {
    std::lock_guard lock(b->mutex);
    for (ProfileEvent& e : b->events) {
      e.start_ns -= session->start_ns;
      profile.events.push_back(std::move(e));
    }
  }
  std::sort(profile.events.begin(), profile.events.end(), [](const auto& a, const auto& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.id < b.id;
  });
  return profile;
}

// --- Profile -----------------------------------------------------------------------------------

std::vector<OpSummary> Profile::summary(GroupBy by) const {
  std::map<std::pair<std::string, std::string>, OpSummary> groups;
  for (const ProfileEvent& e : events) {
    std::string shapes = by == GroupBy::OpAndShape ? detail::shapes_str(e.input_shapes) : "";
    OpSummary& s = groups[{e.name, shapes}];
    s.name = e.name;
    s.shapes = std::move(shapes);
    s.kind = e.kind;
    ++s.count;
    s.total_ns += e.duration_ns;
    s.self_ns += e.self_ns;
    s.flops += e.flops;
    s.bytes_allocated += e.bytes_allocated;
  }
  std::vector<OpSummary> rows;
  for (auto& [key, s] : groups) rows.push_back(std::move(s));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const OpSummary& a, const OpSummary& b) { return a.self_ns > b.self_ns; });
  return rows;
}

int64_t Profile::total_flops() const {
  int64_t total = 0;
  for (const ProfileEvent& e : events)
    if (e.kind != EventKind::Gemm && !e.flops_in_parent) total += e.flops;
  return total;
}

int64_t Profile::gemm_ns() const {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const ProfileEvent& e : events)
    if (e.kind == EventKind::Gemm) spans.emplace_back(e.start_ns, e.start_ns + e.duration_ns);
  std::sort(spans.begin(), spans.end());
  int64_t covered = 0, open_end = INT64_MIN;
  for (const auto& [begin, end] : spans) {  // the union: GEMMs on two threads at once count once
    const int64_t from = std::max(begin, open_end);
    if (end > from) covered += end - from;
    open_end = std::max(open_end, end);
  }
  return covered;
}

double Profile::gemm_fraction() const {
  return wall_ns > 0 ? static_cast<double>(gemm_ns()) / static_cast<double>(wall_ns) : 0.0;
}

std::string Profile::table(GroupBy by, size_t max_rows) const {
  const std::vector<OpSummary> rows = summary(by);
  size_t name_width = 4;
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i)
    name_width = std::max(name_width, rows[i].name.size());
  const double wall = std::max<double>(static_cast<double>(wall_ns), 1.0);
  std::string out = fmt::format("profile: {:.3f} ms wall, {} events, {:.4g} GFLOP\n", wall / 1e6,
                                events.size(), static_cast<double>(total_flops()) / 1e9);
  out += fmt::format("{:<{}}  {:>6}  {:>10}  {:>10}  {:>6}  {:>9}  {:>8}  {:>10}{}\n", "name",
                     name_width, "calls", "total ms", "self ms", "self%", "GFLOP", "GFLOP/s",
                     "allocated", by == GroupBy::OpAndShape ? "  input shapes" : "");
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const OpSummary& r = rows[i];
    const double gflop = static_cast<double>(r.flops) / 1e9;
    const std::string rate =
        r.flops > 0 && r.total_ns > 0
            ? fmt::format("{:.2f}", static_cast<double>(r.flops) / static_cast<double>(r.total_ns))
            : "-";
    out += fmt::format("{:<{}}  {:>6}  {:>10.3f}  {:>10.3f}  {:>5.1f}%  {:>9}  {:>8}  {:>10}{}\n",
                       r.name, name_width, r.count, static_cast<double>(r.total_ns) / 1e6,
                       static_cast<double>(r.self_ns) / 1e6,
                       100.0 * static_cast<double>(r.self_ns) / wall,
                       r.flops > 0 ? fmt::format("{:.4f}", gflop) : "-", rate,
                       human_bytes(r.bytes_allocated), r.shapes.empty() ? "" : "  " + r.shapes);
  }
  if (rows.size() > max_rows) out += fmt::format("... {} more rows\n", rows.size() - max_rows);
  out += fmt::format("GEMM (ops/gemm.cpp): {:.1f}% of the wall time ({:.3f} ms)\n",
                     100.0 * gemm_fraction(), static_cast<double>(gemm_ns()) / 1e6);
  return out;
}

std::string Profile::chrome_trace_json() const {
  // Trace Event Format: complete events ("ph": "X"), times in microseconds.
  nlohmann::json trace_events = nlohmann::json::array();
  std::map<int, bool> threads;
  for (const ProfileEvent& e : events) {
    threads[e.thread] = true;
    nlohmann::json args = {{"input_shapes", detail::shapes_str(e.input_shapes)},
                           {"dtype", dtype_name(e.dtype)},
                           {"self_us", static_cast<double>(e.self_ns) / 1e3},
                           {"bytes_allocated", e.bytes_allocated},
                           {"id", e.id},
                           {"parent", e.parent}};
    if (e.flops > 0) args["flops"] = e.flops;
    trace_events.push_back({{"name", e.name},
                            {"cat", kind_name(e.kind)},
                            {"ph", "X"},
                            {"ts", static_cast<double>(e.start_ns) / 1e3},
                            {"dur", static_cast<double>(e.duration_ns) / 1e3},
                            {"pid", 1},
                            {"tid", e.thread},
                            {"args", std::move(args)}});
  }
  for (const auto& [thread, unused] : threads) {
    const std::string name = thread == caller_thread ? "caller" : fmt::format("thread {}", thread);
    trace_events.push_back({{"name", "thread_name"},
                            {"ph", "M"},
                            {"pid", 1},
                            {"tid", thread},
                            {"args", {{"name", name}}}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

void Profile::write_chrome_trace(const std::string& path) const {
  detail::write_text_file("Profile::write_chrome_trace", path, chrome_trace_json());
}

}  // namespace nabla::inspect
