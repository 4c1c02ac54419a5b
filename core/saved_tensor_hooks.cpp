#include "nabla/core/saved_tensor_hooks.h"

namespace nabla {

namespace {
thread_local SavedTensorHooks* installed_hooks = nullptr;
}  // namespace

SavedTensorHooksGuard::SavedTensorHooksGuard(SavedTensorHooks* hooks) : prev_(installed_hooks) {
  installed_hooks = hooks;
}

SavedTensorHooksGuard::~SavedTensorHooksGuard() { installed_hooks = prev_; }

SavedTensorHooks* current_saved_tensor_hooks() { return installed_hooks; }

}  // namespace nabla
