// The backward trace: while a BackwardTrace is alive, the engine records every node it runs on
// this thread, in the order it runs them: the gradient the node received (shape, L2 norm), the
// gradients it sent to its inputs (norms, after summing down to each input's shape, as the
// engine does), the saved tensors its formula read and the memory its released saved tensors
// gave back, and its time.
//
//   inspect::BackwardTrace tracer;
//   loss.backward();
//   inspect::Trace trace = tracer.stop();
//   std::cout << trace.table();              // or trace.json_lines()
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nabla/core/inspect/instrument.h"

namespace nabla::inspect {

struct TraceOptions {
  // Keep a copy of every received and sent gradient (Trace values), not only its norm.
  bool keep_gradients = false;
};

struct SentGradient {
  std::string to;     // the node it flows into; "" when that input needs no gradient
  bool sent = false;  // false: undefined (zero), no edge, or written straight into a buffer
  Shape shape;        // the input's shape
  double norm = 0;    // L2 norm
  Tensor value;       // with keep_gradients
};

struct TraceRecord {
  size_t index = 0;  // position in engine order
  std::string node;  // "MatmulBackward"
  std::string op;    // the forward op that recorded it, "matmul"
  uint64_t sequence_nr = 0;
  Shape grad_shape;  // the gradient it received (its output's)
  double grad_norm = 0;
  Tensor grad;                     // with keep_gradients
  std::vector<SentGradient> sent;  // one per input
  // The view shortcut (Node::backward_into) added the gradient into the input's buffer: no
  // separate gradient existed to measure.
  bool into_buffer = false;
  int64_t saved_read_bytes = 0;   // saved tensors its formula read (each tensor's own bytes)
  int64_t saved_freed_bytes = 0;  // storages that went back to the allocator when it released
                                  // its saved tensors (their size classes)
  int64_t duration_ns = 0;
};

struct Trace {
  std::vector<TraceRecord> nodes;  // in engine order

  // One row per node: index, node, received (shape, norm), sent norms, saved read / freed, time.
  std::string table() const;
  // One JSON object per line and node.
  std::string json_lines() const;
  // Throws IOError when the file cannot be written.
  void write_json_lines(const std::string& path) const;
};

class BackwardTrace {
 public:
  // Starts recording the nodes the engine runs on this thread. Throws Error if another
  // BackwardTrace is recording.
  explicit BackwardTrace(TraceOptions options = {});
  ~BackwardTrace();
  BackwardTrace(const BackwardTrace&) = delete;
  BackwardTrace& operator=(const BackwardTrace&) = delete;
  // Stops recording and returns the trace. Throws Error on a second call.
  Trace stop();

 private:
  bool running_ = true;
};

namespace detail {
// Called by instrument.cpp. Whether this thread's engine is being traced (and with which
// options); a finished record.
bool tracing_this_thread(TraceOptions* options);
void record_trace(TraceRecord&& record);
}  // namespace detail

}  // namespace nabla::inspect
