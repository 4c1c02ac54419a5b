// The backward trace's session and its two printed forms.
#include "nabla/core/inspect/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "nabla/core/error.h"

namespace nabla::inspect {
namespace {

struct Session {
  std::thread::id owner;
  TraceOptions options;
  std::vector<TraceRecord> records;
};

std::mutex session_mutex;
std::unique_ptr<Session> active;  // guarded by session_mutex

std::string norm_str(double v) { return fmt::format("{:.6g}", v); }

nlohmann::json shape_json(const Shape& s) { return nlohmann::json(std::vector<int64_t>(s)); }

std::string bytes_str(int64_t b) {
  if (b >= 1 << 20) return fmt::format("{:.2f} MB", static_cast<double>(b) / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KB", static_cast<double>(b) / (1 << 10));
  return fmt::format("{} B", b);
}

// "[2, 26.3]": one norm per input, "-" where none was sent.
std::string sent_str(const TraceRecord& r) {
  if (r.into_buffer) return "into input buffer";
  std::string s = "[";
  for (size_t i = 0; i < r.sent.size(); ++i)
    s += (i ? ", " : "") + (r.sent[i].sent ? norm_str(r.sent[i].norm) : std::string("-"));
  return s + "]";
}

}  // namespace

namespace detail {

bool tracing_this_thread(TraceOptions* options) {
  std::lock_guard lock(session_mutex);
  if (!active || active->owner != std::this_thread::get_id()) return false;
  *options = active->options;
  return true;
}

void record_trace(TraceRecord&& record) {
  std::lock_guard lock(session_mutex);
  if (!active) return;
  record.index = active->records.size();
  active->records.push_back(std::move(record));
}

}  // namespace detail

BackwardTrace::BackwardTrace(TraceOptions options) {
  std::lock_guard lock(session_mutex);
  if (active)
    throw Error("BackwardTrace: another BackwardTrace is already recording; stop() it first");
  active = std::make_unique<Session>();
  active->owner = std::this_thread::get_id();
  active->options = options;
  detail::set_tool(detail::kTrace, true);
}

BackwardTrace::~BackwardTrace() {
  if (running_) stop();
}

Trace BackwardTrace::stop() {
  if (!running_) throw Error("BackwardTrace::stop: the trace was already stopped");
  running_ = false;
  detail::set_tool(detail::kTrace, false);
  std::lock_guard lock(session_mutex);
  Trace trace;
  trace.nodes = std::move(active->records);
  active.reset();
  return trace;
}

std::string Trace::table() const {
  const std::string received_header = "received (shape, norm)", sent_header = "sent (norms)";
  size_t node_width = 4, received_width = received_header.size(), sent_width = sent_header.size();
  std::vector<std::string> received, sent;
  for (const TraceRecord& r : nodes) {
    received.push_back(fmt::format("{} {}", shape_str(r.grad_shape), norm_str(r.grad_norm)));
    sent.push_back(sent_str(r));
    node_width = std::max(node_width, r.node.size());
    received_width = std::max(received_width, received.back().size());
    sent_width = std::max(sent_width, sent.back().size());
  }
  std::string out = fmt::format("{:>4}  {:<{}}  {:<{}}  {:<{}}  {:>10}  {:>11}  {:>10}\n", "#",
                                "node", node_width, received_header, received_width, sent_header,
                                sent_width, "saved read", "saved freed", "time us");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TraceRecord& r = nodes[i];
    out += fmt::format("{:>4}  {:<{}}  {:<{}}  {:<{}}  {:>10}  {:>11}  {:>10.1f}\n", r.index,
                       r.node, node_width, received[i], received_width, sent[i], sent_width,
                       bytes_str(r.saved_read_bytes), bytes_str(r.saved_freed_bytes),
                       static_cast<double>(r.duration_ns) / 1e3);
  }
  return out;
}

std::string Trace::json_lines() const {
  std::string out;
  for (const TraceRecord& r : nodes) {
    nlohmann::json sent = nlohmann::json::array();
    for (const SentGradient& s : r.sent)
      sent.push_back({{"to", s.to},
                      {"shape", shape_json(s.shape)},
                      {"norm", s.sent ? nlohmann::json(s.norm) : nlohmann::json(nullptr)}});
    nlohmann::json line = {{"index", r.index},
                           {"node", r.node},
                           {"op", r.op},
                           {"sequence_nr", r.sequence_nr},
                           {"grad_shape", shape_json(r.grad_shape)},
                           {"grad_norm", r.grad_norm},
                           {"sent", std::move(sent)},
                           {"into_buffer", r.into_buffer},
                           {"saved_read_bytes", r.saved_read_bytes},
                           {"saved_freed_bytes", r.saved_freed_bytes},
                           {"duration_us", static_cast<double>(r.duration_ns) / 1e3}};
    out += line.dump() + "\n";
  }
  return out;
}

void Trace::write_json_lines(const std::string& path) const {
  detail::write_text_file("Trace::write_json_lines", path, json_lines());
}

}  // namespace nabla::inspect
