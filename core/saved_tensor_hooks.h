// Saved-tensor hooks, PyTorch's torch.autograd.graph.saved_tensors_hooks: while hooks are
// installed on a thread, SavedTensor::save hands each tensor an op saves for backward to pack()
// and keeps only what pack() returns; SavedTensor::get asks that object for the tensor back.
// Gradient checkpointing (core/grad_checkpoint.h) packs into a placeholder in forward and
// recomputes the tensors in backward. Installing nothing costs one thread-local load per save.
#pragma once
#include <memory>

#include "nabla/core/tensor.h"

namespace nabla {

class Node;

// What a hook kept of one saved tensor.
class PackedTensor {
 public:
  virtual ~PackedTensor() = default;
  // The saved tensor, when a backward formula asks for it (SavedTensor::get).
  virtual Tensor unpack() = 0;
};

class SavedTensorHooks {
 public:
  virtual ~SavedTensorHooks() = default;
  // `t` (defined) is being saved by `owner`; is_output: t is the owner's own output. A null
  // result: t is saved as usual.
  virtual std::shared_ptr<PackedTensor> pack(const Node& owner, const Tensor& t,
                                             bool is_output) = 0;
};

// Installs `hooks` on this thread for its scope; scopes nest and the innermost one packs.
class SavedTensorHooksGuard {
 public:
  explicit SavedTensorHooksGuard(SavedTensorHooks* hooks);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;

 private:
  SavedTensorHooks* prev_;
};

// The hooks installed on this thread, or null.
SavedTensorHooks* current_saved_tensor_hooks();

}  // namespace nabla
