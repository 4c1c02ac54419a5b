// Gradient checkpointing (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost";
// PyTorch's torch.utils.checkpoint with use_reentrant=False): trade compute for memory.
//
//   Tensor y = checkpoint([layer](const Tensor& x) { return (*layer)(x); }, x);
//
// The forward runs fn as usual and records its graph, but keeps none of the tensors its ops save
// for backward (saved-tensor hooks, core/saved_tensor_hooks.h): only fn's inputs are kept. The
// first backward formula inside fn that needs a saved tensor re-runs fn on the (detached) inputs
// with grad mode on and collects what its ops save, in the same order; the original nodes then
// run with those. The graph is the one an unchecked run records, so gradients reach inputs,
// parameters and anything fn captures, autograd::grad works, and the gradients are bitwise the
// unchecked ones: the recompute computes the same values, and every generator fn drew from
// (dropout's Philox counters, Generator::advance) is set back to where fn's forward started
// drawing for the recompute, then restored.
//
// Rules:
//   - fn is kept (copied) until the backward: capture what it needs by value (shared_ptr to a
//     module, tensors), never references to locals of the caller.
//   - fn must compute the same thing when re-run: an input, parameter or captured tensor changed
//     in place between forward and backward, a train/eval switch or other randomness is an
//     AutogradError naming what differs, at the recompute (the saved tensors' shapes, dtypes and
//     versions and the generator draws are compared).
//   - Under NoGradGuard checkpoint just calls fn. Module hooks inside fn run again in the
//     recompute, as in PyTorch.
//   - Nested checkpoints work: the inner one's inputs are recomputed by the outer one.
//   - Double backward works: under create_graph the recompute runs on the inputs themselves and
//     the tensors it hands out keep their history (and that recomputed graph lives as long as
//     the checkpointed one).
//   - Generators must outlive the backward (the default one, a module's); one that fn creates
//     replays by itself (same seed) and is not tracked.
#pragma once
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/tensor.h"

namespace nabla {

namespace detail {

class CheckpointFrame;
struct CheckpointRecording;
using CheckpointReplay = std::function<void(const std::vector<Tensor>&)>;

// One checkpointed forward, for its scope: keeps the inputs (through SavedTensors, so an
// enclosing checkpoint recomputes them too), then packs every tensor fn's ops save and watches
// the generators fn draws from.
class CheckpointScope {
 public:
  CheckpointScope(const std::vector<Tensor>& inputs, CheckpointReplay replay);
  ~CheckpointScope();
  CheckpointScope(const CheckpointScope&) = delete;
  CheckpointScope& operator=(const CheckpointScope&) = delete;

 private:
  std::shared_ptr<CheckpointFrame> frame_;
  std::unique_ptr<CheckpointRecording> recording_;
};

// The recompute: fn(in[0], in[1], ...).
template <class F, size_t... I>
void call_with(F& fn, [[maybe_unused]] const std::vector<Tensor>& in, std::index_sequence<I...>) {
  (void)std::invoke(fn, in[I]...);
}

}  // namespace detail

// fn(inputs...) with its activations recomputed in backward (see the top of this file). fn takes
// the tensors and may return anything (a Tensor, a std::vector<Tensor>, a struct of tensors).
template <class F, class... Inputs>
auto checkpoint(F&& fn, const Inputs&... inputs) {
  static_assert((std::is_same_v<Inputs, Tensor> && ...),
                "checkpoint(fn, inputs...): the inputs are Tensors; capture other values in fn");
  if (!GradMode::enabled()) return std::invoke(fn, inputs...);
  auto kept = std::make_shared<std::decay_t<F>>(fn);  // a copy: the caller's fn may be a temporary
  detail::CheckpointScope scope({inputs...}, [kept](const std::vector<Tensor>& in) {
    detail::call_with(*kept, in, std::index_sequence_for<Inputs...>{});
  });
  return std::invoke(fn, inputs...);
}

// The same for a list of inputs: fn(const std::vector<Tensor>&).
template <class F>
auto checkpoint(F&& fn, const std::vector<Tensor>& inputs) {
  if (!GradMode::enabled()) return std::invoke(fn, inputs);
  auto kept = std::make_shared<std::decay_t<F>>(fn);
  detail::CheckpointScope scope(
      inputs, [kept](const std::vector<Tensor>& in) { (void)std::invoke(*kept, in); });
  return std::invoke(fn, inputs);
}

}  // namespace nabla
