// The thread-local current module scope (see scope.h).
#include "nabla/core/inspect/scope.h"

#include <utility>

namespace nabla::inspect {

namespace {
thread_local std::shared_ptr<const ModuleScope> current_scope;
}  // namespace

const ModuleScope* ModuleScope::ancestor_at(int level) const {
  const ModuleScope* s = this;
  while (s->depth > level && s->parent) s = s->parent.get();
  return s;
}

const std::shared_ptr<const ModuleScope>& current_module_scope() { return current_scope; }

ModuleScopePush::ModuleScopePush(std::shared_ptr<const ModuleScope> scope)
    : previous_(std::exchange(current_scope, std::move(scope))) {}

ModuleScopePush::~ModuleScopePush() { current_scope = std::move(previous_); }

}  // namespace nabla::inspect
