// Gradient checkpointing: the frame one checkpointed forward leaves behind, the saved-tensor
// hooks that fill it (forward: placeholders; recompute: the tensors) and the generator watch
// that replays random draws. The design is at the top of core/grad_checkpoint.h.
#include "nabla/core/grad_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "nabla/core/error.h"
#include "nabla/core/generator.h"
#include "nabla/core/saved_tensor_hooks.h"

namespace nabla {
namespace detail {

// --- generator watch ---------------------------------------------------------------------------

// One generator's draws inside a checkpointed function.
struct GeneratorDraws {
  const Generator* gen;
  uint64_t seed, first;   // its state before the first draw
  uint64_t counters = 0;  // counters drawn in all
};

// Record (forward): `draws` collects what fn draws. Replay (recompute, `replay` set): the first
// draw from a generator the forward drew from sets it back to the forward's first state, and
// `restore` remembers the state to put back afterwards.
struct GeneratorWatch {
  GeneratorWatch* parent = nullptr;
  std::vector<GeneratorDraws> draws;
  const std::vector<GeneratorDraws>* replay = nullptr;
  struct Saved {
    Generator* gen;
    uint64_t seed, offset;
  };
  std::vector<Saved> restore;
};

constinit thread_local GeneratorWatch* generator_watch = nullptr;

namespace {

GeneratorDraws* find_draws(std::vector<GeneratorDraws>& draws, const Generator* gen) {
  auto it = std::find_if(draws.begin(), draws.end(), [&](auto& d) { return d.gen == gen; });
  return it == draws.end() ? nullptr : &*it;
}

// The watches on this thread, outermost first (a replay inside a record, or the reverse, nests).
std::vector<GeneratorWatch*> watch_chain() {
  std::vector<GeneratorWatch*> chain;
  for (GeneratorWatch* w = generator_watch; w; w = w->parent) chain.push_back(w);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

void before_draw(Generator& gen) {
  for (GeneratorWatch* w : watch_chain()) {
    if (!w->replay || find_draws(w->draws, &gen)) continue;  // not replaying, or done already
    auto it = std::find_if(w->replay->begin(), w->replay->end(),
                           [&](const GeneratorDraws& d) { return d.gen == &gen; });
    if (it == w->replay->end()) continue;  // not drawn in forward: the check after reports it
    w->restore.push_back({&gen, gen.seed(), gen.offset()});
    gen.set_state(it->seed, it->first);
  }
}

void after_draw(const Generator& gen, uint64_t first, uint64_t n) {
  for (GeneratorWatch* w = generator_watch; w; w = w->parent) {
    if (GeneratorDraws* d = find_draws(w->draws, &gen))
      d->counters += n;
    else
      w->draws.push_back({&gen, gen.seed(), first, n});
  }
}

// A generator that dies while watched was made inside fn: it replays by itself.
void forget_generator(const Generator& gen) {
  for (GeneratorWatch* w = generator_watch; w; w = w->parent) {
    std::erase_if(w->draws, [&](const GeneratorDraws& d) { return d.gen == &gen; });
    std::erase_if(w->restore, [&](const GeneratorWatch::Saved& s) { return s.gen == &gen; });
  }
}

namespace {

// Installs a watch for its scope.
class WatchScope {
 public:
  explicit WatchScope(const std::vector<GeneratorDraws>* replay = nullptr) {
    watch_.replay = replay;
    watch_.parent = generator_watch;
    generator_watch = &watch_;
  }
  ~WatchScope() {
    generator_watch = watch_.parent;
    for (const GeneratorWatch::Saved& s : watch_.restore) s.gen->set_state(s.seed, s.offset);
  }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;
  GeneratorWatch& watch() { return watch_; }

 private:
  GeneratorWatch watch_;
};

[[noreturn]] void replay_differs(const std::string& what) {
  throw AutogradError(fmt::format(
      "checkpoint: the recompute of the checkpointed function {}; it must draw the same random "
      "numbers each time (a train/eval switch between forward and backward changes dropout)",
      what));
}

// The recompute drew what the forward drew: the same generators, the same number of counters.
void check_replayed(const std::vector<GeneratorDraws>& forward,
                    const std::vector<GeneratorDraws>& recompute) {
  auto drawn_by = [](const std::vector<GeneratorDraws>& draws, const Generator* gen) {
    auto it = std::find_if(draws.begin(), draws.end(), [&](auto& d) { return d.gen == gen; });
    return it == draws.end() ? nullptr : &*it;
  };
  for (const GeneratorDraws& f : forward) {
    const GeneratorDraws* r = drawn_by(recompute, f.gen);
    if (!r)
      replay_differs(fmt::format("drew nothing from a generator its forward drew {} counters from",
                                 f.counters));
    if (r->counters != f.counters)
      replay_differs(fmt::format("drew {} counters from a generator its forward drew {} from",
                                 r->counters, f.counters));
  }
  for (const GeneratorDraws& r : recompute)
    if (!drawn_by(forward, r.gen))
      replay_differs(fmt::format("drew {} counters from a generator its forward did not draw from",
                                 r.counters));
}

// --- the frame ---------------------------------------------------------------------------------

// Owns the SavedTensors of the inputs (not part of the graph; its name is in their errors).
struct CheckpointBackward final : Node {
  std::vector<std::unique_ptr<SavedTensor>> inputs;
  std::vector<Tensor> backward(const Tensor&) override {
    throw AutogradError("CheckpointBackward: holds a checkpoint's inputs and never runs");
  }
  const char* name() const override { return "CheckpointBackward"; }
};

// What the forward saw of one saved tensor, to compare with the recompute.
struct SaveRecord {
  Shape shape;
  DType dtype;
  uint64_t version;
  std::string node;
};

}  // namespace

class CheckpointFrame {
 public:
  CheckpointReplay replay;
  std::shared_ptr<CheckpointBackward> holder = std::make_shared<CheckpointBackward>();
  std::vector<bool> input_requires_grad;
  std::vector<SaveRecord> saves;      // one per tensor fn's ops saved, in order
  std::vector<GeneratorDraws> draws;  // what fn's forward drew
  std::vector<Tensor> recomputed;     // by save index, each dropped when its slot is released
  std::vector<bool> released;         // slots released (before or after the recompute)
  bool recomputed_all = false;
  bool with_history = false;  // recomputed under create_graph: the tensors keep their history

  Tensor unpack(size_t i);
  void release(size_t i) {
    released[i] = true;
    if (i < recomputed.size()) recomputed[i] = Tensor();
  }

 private:
  void recompute(bool history);
};

namespace {

// A saved tensor of the forward: its index in the frame.
class CheckpointSlot final : public PackedTensor {
 public:
  CheckpointSlot(std::shared_ptr<CheckpointFrame> frame, size_t index)
      : frame_(std::move(frame)), index_(index) {}
  ~CheckpointSlot() override { frame_->release(index_); }
  Tensor unpack() override { return frame_->unpack(index_); }

 private:
  std::shared_ptr<CheckpointFrame> frame_;
  size_t index_;
};

// Forward: remembers what each saved tensor looks like and keeps a placeholder.
class RecordSaves final : public SavedTensorHooks {
 public:
  explicit RecordSaves(std::shared_ptr<CheckpointFrame> frame) : frame_(std::move(frame)) {}
  std::shared_ptr<PackedTensor> pack(const Node& owner, const Tensor& t, bool) override {
    frame_->saves.push_back({t.shape(), t.dtype(), t.storage()->version(), owner.name()});
    frame_->released.push_back(false);
    return std::make_shared<CheckpointSlot>(frame_, frame_->saves.size() - 1);
  }

 private:
  std::shared_ptr<CheckpointFrame> frame_;
};

// Recompute: checks each saved tensor against the forward's and keeps it in the frame (its data
// only, unless the recompute is for create_graph); the recompute's own graph saves as usual.
class CollectSaves final : public SavedTensorHooks {
 public:
  CollectSaves(CheckpointFrame& frame, bool history) : frame_(frame), history_(history) {}
  std::shared_ptr<PackedTensor> pack(const Node& owner, const Tensor& t, bool) override {
    const size_t i = count++;
    if (i >= frame_.saves.size()) return nullptr;  // reported after the recompute
    const SaveRecord& f = frame_.saves[i];
    const uint64_t version = t.storage()->version();
    if (f.node != owner.name() || f.shape != t.shape() || f.dtype != t.dtype())
      throw AutogradError(fmt::format(
          "checkpoint: the recompute of the checkpointed function differs from its forward: "
          "saved tensor {} is {} {} of {} in the recompute but {} {} of {} in the forward; the "
          "function must run the same ops on the same shapes each time (no train/eval switch or "
          "other change of state between forward and backward)",
          i, shape_str(t.shape()), dtype_name(t.dtype()), owner.name(), shape_str(f.shape),
          dtype_name(f.dtype), f.node));
    if (version != f.version)
      throw AutogradError(fmt::format(
          "checkpoint: a tensor of shape {} that {} saved (saved tensor {} of the checkpointed "
          "function) has version {} in the recompute but {} in the forward: an input, parameter "
          "or captured tensor was modified in place between forward and backward",
          shape_str(t.shape()), owner.name(), i, version, f.version));
    if (!frame_.released[i]) frame_.recomputed[i] = history_ ? t : t.data_view();
    return nullptr;
  }
  size_t count = 0;

 private:
  CheckpointFrame& frame_;
  bool history_;
};

}  // namespace

Tensor CheckpointFrame::unpack(size_t i) {
  // Under create_graph (grad mode on in backward) the formulas differentiate through what they
  // read: the recompute then runs on the inputs themselves and keeps each tensor's history.
  const bool history = GradMode::enabled();
  if (!recomputed_all || (history && !with_history)) recompute(history);
  return recomputed[i];
}

void CheckpointFrame::recompute(bool history) {
  // The inputs first, outside this recompute's hooks: under a nested checkpoint they are an
  // enclosing one's saved tensors, recomputed by it.
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < holder->inputs.size(); ++i) {
    Tensor t = holder->inputs[i]->get();  // an AutogradError if modified in place since
    if (t.defined() && !history) {        // detached: the recompute's graph ends at them
      t = t.data_view();
      if (input_requires_grad[i]) t.requires_grad_();
    }
    inputs.push_back(std::move(t));
  }
  recomputed.assign(saves.size(), Tensor());
  CollectSaves collect(*this, history);
  {
    SavedTensorHooksGuard hooks(&collect);
    EnableGradGuard grad_on;
    WatchScope watch(&draws);
    replay(inputs);
    check_replayed(draws, watch.watch().draws);
  }
  if (collect.count != saves.size())
    throw AutogradError(fmt::format(
        "checkpoint: the recompute of the checkpointed function saved {} tensors for backward "
        "but its forward saved {}; the function must run the same ops each time (no train/eval "
        "switch or other change of state between forward and backward)",
        collect.count, saves.size()));
  recomputed_all = true;
  with_history = history;
}

// --- the forward -------------------------------------------------------------------------------

struct CheckpointRecording {
  explicit CheckpointRecording(std::shared_ptr<CheckpointFrame> frame)
      : record(std::move(frame)), hooks(&record) {}
  RecordSaves record;
  SavedTensorHooksGuard hooks;
  WatchScope watch;  // last: removed first
};

CheckpointScope::CheckpointScope(const std::vector<Tensor>& inputs, CheckpointReplay replay)
    : frame_(std::make_shared<CheckpointFrame>()) {
  frame_->replay = std::move(replay);
  for (const Tensor& t : inputs) {
    auto saved = std::make_unique<SavedTensor>(frame_->holder.get(), "input");
    saved->save(t);  // before this checkpoint's hooks: an enclosing checkpoint's pack it
    frame_->holder->inputs.push_back(std::move(saved));
    frame_->input_requires_grad.push_back(t.defined() && t.requires_grad());
  }
  recording_ = std::make_unique<CheckpointRecording>(frame_);
}

CheckpointScope::~CheckpointScope() {
  frame_->draws = std::move(recording_->watch.watch().draws);
  recording_.reset();
}

}  // namespace detail
}  // namespace nabla
