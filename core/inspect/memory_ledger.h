// The memory ledger: where the allocator's live bytes are, by category. Parameters, their
// gradients and the optimizer's state are the tensors the ledger is told about; saved
// activations are the tensors the graph's nodes hold for backward; "other" is the rest of the
// allocator's live bytes (inputs, outputs, temporaries); the idle cache is the allocator's free
// blocks held for reuse (not live). Each storage counts once, in the first category that holds
// it, by its allocator size class, so the live categories add up to allocator::live_bytes().
//
//   inspect::MemoryLedger ledger;
//   ledger.track_parameters(model.named_parameters());
//   ledger.track_optimizer_state([&] { return state_tensors(optimizer); });
//   ledger.start();                       // per-op timeline and peak
//   train_step();
//   inspect::MemoryTimeline timeline = ledger.stop();
//   timeline.write_csv("memory.csv");     // bytes against op index, by category
//   std::cout << ledger.snapshot().table();
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nabla/core/inspect/instrument.h"

namespace nabla::inspect {

struct MemoryCategories {
  int64_t parameters = 0;
  int64_t gradients = 0;  // of the tracked parameters
  int64_t optimizer_state = 0;
  int64_t saved_activations = 0;
  // The rest of the allocator's live bytes. Negative only if other threads freed tensors while
  // the snapshot was taken.
  int64_t other = 0;
  int64_t idle_cache = 0;  // free blocks the allocator holds for reuse; not live
  int64_t live() const {
    return parameters + gradients + optimizer_state + saved_activations + other;
  }
};

// Saved activations of the nodes one forward op recorded.
struct SavedBytes {
  std::string op;  // "matmul"
  // The module whose forward recorded the nodes (their module scope); "" outside modules or
  // when no nn::RecordScopes was alive.
  std::string module;
  int64_t nodes = 0;  // nodes holding saved tensors
  int64_t bytes = 0;  // storages no parameter, gradient, state or earlier node already holds
};

// Parameters and their gradients of one module (a named parameter's name up to its last dot).
struct ModuleBytes {
  std::string module;  // "encoder.layers.0.attn"; "" for top-level parameters
  int64_t parameters = 0;
  int64_t gradients = 0;
};

struct MemorySnapshot {
  MemoryCategories bytes;
  int64_t allocator_live = 0;           // allocator::live_bytes() when the snapshot was taken
  std::vector<SavedBytes> saved_by_op;  // largest first
  std::vector<ModuleBytes> parameters_by_module;  // in parameter order
  std::string table() const;                      // the categories, then saved bytes by op
};

enum class Phase { Forward, Backward, NoGrad };
const char* phase_name(Phase phase);  // "forward", "backward", "no_grad"

// Live bytes after one op (outermost ops only: a composite's inner ops are inside it) or one
// backward node.
struct TimelinePoint {
  int64_t index = 0;
  std::string op;  // "linear", "LinearBackward"
  Phase phase = Phase::Forward;
  MemoryCategories bytes;
};

struct MemoryTimeline {
  std::vector<TimelinePoint> points;
  int64_t start_live_bytes = 0;
  int64_t peak_live_bytes = 0;  // the most the allocator held live while recording, at any moment
  // index,phase,op,parameters,gradients,optimizer_state,saved_activations,other,idle_cache,live
  std::string csv() const;
  void write_csv(const std::string& path) const;  // throws IOError when it cannot write
};

class MemoryLedger {
 public:
  MemoryLedger();
  ~MemoryLedger();  // stops recording
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  // Named as Module::named_parameters() names them; the prefix before the last dot is the module.
  void track_parameters(const std::vector<std::pair<std::string, Tensor>>& named);
  // Called at each snapshot: optimizer state appears at the first step.
  void track_optimizer_state(std::function<std::vector<Tensor>()> state);

  // The categories now. Saved activations: of the nodes below `outputs` and of the nodes this
  // thread recorded while this ledger was recording. Throws AutogradError if another thread's
  // backward is running a node below `outputs` (core/graph_use.h).
  MemorySnapshot snapshot(const std::vector<Tensor>& outputs = {}) const;

  // Records a timeline point after every outermost op and backward node run on this thread,
  // remembers the nodes this thread records (for their saved tensors), and watches the
  // allocator's peak.
  // Throws Error if a ledger is already recording.
  void start();
  MemoryTimeline stop();  // throws Error if not recording

  struct State;

 private:
  std::unique_ptr<State> state_;
};

namespace detail {
// Called by instrument.cpp: an outermost op or node finished on some thread; a node recorded.
void ledger_point(const char* op, Phase phase);
void ledger_node(const std::shared_ptr<Node>& node);
}  // namespace detail

}  // namespace nabla::inspect
