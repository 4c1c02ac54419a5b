// Why did a parameter get no gradient? A CutRecorder, while active on its thread, notes every
// place where a path from a tensor that requires grad ends:
//   - detach():            the detached tensor has no history (noted in grad mode only);
//   - no-grad mode:        an op ran under NoGradGuard on an input that requires grad;
//   - non-differentiable:  argmax/argmin, comparisons, a cast to an integer or bool dtype;
// and the first recorded op that read each leaf. The engine also reports to it the first
// non-finite gradient in engine order (the anomaly check, without throwing). Nothing is walked at
// note time: a note keeps the input's grad_fn (or leaf), and explain() walks from there to the
// leaves afterwards. The library's own internal detach() calls (ops read their inputs' data
// through detached handles) are cancelled when the same op then records its node with that
// input, so only detaches whose tensor really left the graph survive (the same goes for a
// comparison an op makes on an input it then records).
// With no recorder active every hook is one thread-local load; the engine pauses recording
// while it runs (backward formulas are not the user's forward).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {
class Node;
}

namespace nabla::inspect {

struct ModuleScope;
class CutRecorder;

enum class CutKind { Detach, NoGrad, NonDifferentiable };
const char* cut_kind_name(CutKind kind);  // "detach", "no-grad mode", "non-differentiable op"

// The first non-finite gradient of a backward pass, in engine order.
struct NonFiniteGradient {
  std::string node;        // "LogBackward"
  std::string forward_op;  // "log"
  std::string scope;       // module path of the forward op ("" for the root module)
  bool has_scope = false;  // false: recorded outside every module forward
  uint64_t sequence_nr = 0;
  size_t input = 0;  // which input of the node the gradient was for
  Shape shape;
  std::string describe() const;  // one sentence
};

// Why a leaf received no gradient (CutRecorder::explain).
struct NoGradientReason {
  enum class Kind { Cut, NotReached, NeverUsed, Frozen };
  Kind kind = Kind::NeverUsed;
  CutKind cut = CutKind::Detach;  // when kind == Cut
  std::string op;                 // the cutting op, or the first op that read the leaf
  std::string scope;              // its module scope ("" root)
  bool has_scope = false;
  std::string describe() const;  // one sentence
};

namespace detail {
extern constinit thread_local CutRecorder* cut_recorder;      // null: not recording (or paused)
extern constinit thread_local CutRecorder* anomaly_recorder;  // null: no report is listening
void note_cut(CutKind kind, std::string op, std::initializer_list<const Tensor*> inputs);
void note_no_grad_op(const std::type_info& node_type, std::initializer_list<const Tensor*> inputs);
void note_detach(const Tensor& source);
void note_connect(const Node& node, std::initializer_list<const Tensor*> inputs);
void note_non_finite(const Node& node, size_t input, const Tensor& grad);
}  // namespace detail

inline bool recording_cuts() { return detail::cut_recorder != nullptr; }
inline bool recording_non_finite() { return detail::anomaly_recorder != nullptr; }

// Called by ops whose output carries no gradient although an input may require one.
inline void note_non_differentiable(const char* op, std::initializer_list<const Tensor*> inputs) {
  if (recording_cuts()) detail::note_cut(CutKind::NonDifferentiable, op, inputs);
}

// Records on this thread for its lifetime (a nested recorder hides the outer one until it ends).
// Notes keep the cut tensors' graphs alive until the recorder is destroyed.
class CutRecorder {
 public:
  CutRecorder();
  ~CutRecorder();
  CutRecorder(const CutRecorder&) = delete;
  CutRecorder& operator=(const CutRecorder&) = delete;

  void stop();  // stops recording (e.g. before the optimizer step); idempotent
  bool active() const { return active_; }

  // One reason per leaf, for leaves that got no gradient: the first no-grad or
  // non-differentiable cut on a path from it, else the first surviving detach, else the first
  // recorded op that read it (its result never reached the outputs), else "never used".
  std::vector<NoGradientReason> explain(const std::vector<Tensor>& leaves) const;
  const std::optional<NonFiniteGradient>& first_non_finite() const { return non_finite_; }

 private:
  friend void detail::note_cut(CutKind, std::string, std::initializer_list<const Tensor*>);
  friend void detail::note_no_grad_op(const std::type_info&, std::initializer_list<const Tensor*>);
  friend void detail::note_detach(const Tensor&);
  friend void detail::note_connect(const Node&, std::initializer_list<const Tensor*>);
  friend void detail::note_non_finite(const Node&, size_t, const Tensor&);

  struct Cut {
    CutKind kind;
    std::string op;                   // empty: from node_type
    const std::type_info* node_type;  // no-grad cuts: the node that was not recorded
    std::shared_ptr<const ModuleScope> scope;
    std::shared_ptr<Node> source_fn;          // the cut input's grad_fn, or
    std::shared_ptr<TensorImpl> source_leaf;  // the cut input itself when it is a leaf
    uint64_t order;
  };
  struct Use {
    std::string op;
    std::shared_ptr<const ModuleScope> scope;
  };
  void add_cut(CutKind kind, std::string op, const std::type_info* node_type, const Tensor& input);

  bool active_ = false;
  CutRecorder* previous_cut_ = nullptr;
  CutRecorder* previous_anomaly_ = nullptr;
  uint64_t next_order_ = 0;
  std::vector<Cut> cuts_;  // no-grad: nothing is recorded after them, so they are final
  // detach and non-differentiable, by source (grad_fn or leaf impl); erased when an op records
  // that source after all (the library's own detach-to-read, comparisons inside an op)
  std::unordered_map<const void*, Cut> pending_;
  std::unordered_map<const TensorImpl*, Use> uses_;  // first recorded op per leaf
  std::optional<NonFiniteGradient> non_finite_;
};

// Pauses cut recording on this thread for its lifetime (the engine holds one while it runs).
class PauseCutRecording {
 public:
  PauseCutRecording() : saved_(detail::cut_recorder) { detail::cut_recorder = nullptr; }
  ~PauseCutRecording() { detail::cut_recorder = saved_; }
  PauseCutRecording(const PauseCutRecording&) = delete;
  PauseCutRecording& operator=(const PauseCutRecording&) = delete;

 private:
  CutRecorder* saved_;
};

}  // namespace nabla::inspect
