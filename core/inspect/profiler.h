// The profiler: while a Profiler is alive, every public op's forward, every backward node the
// engine runs and every call into ops/gemm.cpp becomes an event (name, input shapes, dtype, FLOPs
// where the op knows them, bytes allocated, time, self time, thread). stop() returns a Profile:
// a summary grouped by op or by op and input shapes (torch.profiler's key_averages()), the share
// of the wall time spent in GEMM, and the Chrome trace-event JSON that Perfetto and
// chrome://tracing open.
//
//   inspect::Profiler profiler;
//   train_step();
//   inspect::Profile profile = profiler.stop();
//   std::cout << profile.table();
//   profile.write_chrome_trace("trace.json");
//
// Process-wide: ops on every thread are recorded (each event names its thread); one Profiler at
// a time. Core's views and copies (reshape, transpose, contiguous) are not ops and not recorded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nabla/core/inspect/instrument.h"

namespace nabla::inspect {

struct ProfileEvent {
  std::string name;  // "matmul", "MatmulBackward", "gemm"
  EventKind kind = EventKind::Op;
  std::vector<Shape> input_shapes;
  DType dtype = kFloat32;  // of the first input
  // The op's FLOPs (a multiply-add counts 2), 0 when it does not say. An event whose FLOPs are
  // part of an enclosing event's (matmul inside conv2d) has flops_in_parent set; gemm events
  // repeat their op's FLOPs. Neither is added again by Profile::total_flops().
  int64_t flops = 0;
  bool flops_in_parent = false;
  int64_t bytes_allocated = 0;       // by the event and its children, on its thread
  int64_t self_bytes_allocated = 0;  // minus its recorded children's
  int64_t start_ns = 0;              // since the profiler started
  int64_t duration_ns = 0;
  int64_t self_ns = 0;  // duration minus the recorded children's on the same thread
  int thread = 0;       // small id, stable for the process's life
  uint64_t id = 0;      // unique within the profile, from 1
  uint64_t parent = 0;  // the enclosing event on the same thread; 0 for none
};

enum class GroupBy { Op, OpAndShape };

struct OpSummary {
  std::string name;
  std::string shapes;  // with GroupBy::OpAndShape, e.g. "[(64, 128), (256, 128)]"
  EventKind kind = EventKind::Op;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;
  int64_t flops = 0;  // summed over the group's events
  int64_t bytes_allocated = 0;
};

struct Profile {
  std::vector<ProfileEvent> events;  // by start time
  int64_t wall_ns = 0;               // from the Profiler's start to stop()
  int caller_thread = 0;             // the thread that ran the Profiler

  // Groups sorted by self time, largest first.
  std::vector<OpSummary> summary(GroupBy by = GroupBy::Op) const;
  // An aligned table of summary(by): count, total and self time (ms and % of the wall time),
  // FLOPs and GFLOP/s, bytes allocated; then the GEMM share. At most max_rows rows.
  std::string table(GroupBy by = GroupBy::Op, size_t max_rows = 30) const;
  // FLOPs of every op and backward node, each counted once.
  int64_t total_flops() const;
  // Wall time during which at least one GEMM ran (on any thread), and its share of wall_ns.
  int64_t gemm_ns() const;
  double gemm_fraction() const;
  // {"traceEvents": [...]} with one complete ("X") event per recorded event.
  std::string chrome_trace_json() const;
  // Throws IOError when the file cannot be written.
  void write_chrome_trace(const std::string& path) const;
};

class Profiler {
 public:
  Profiler();  // starts recording; throws Error if another Profiler is recording
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  // Stops recording and returns the events. Throws Error on a second call.
  Profile stop();

 private:
  bool running_ = true;
};

namespace detail {
// Called by instrument.cpp: the session events opened now belong to (0: not profiling), and a
// finished event of that session.
uint64_t profile_session();
uint64_t new_event_id();
void record_profile_event(uint64_t session, ProfileEvent&& event);
int64_t now_ns();                                          // steady clock
int thread_index();                                        // this thread's small id
std::string shapes_str(const std::vector<Shape>& shapes);  // "[(2, 3), (3, 4)]"
}  // namespace detail

}  // namespace nabla::inspect
