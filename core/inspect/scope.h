// Module scopes: while a module's forward runs (nn::Module::call), the thread's current scope is
// a record of that module's dotted path, and every autograd Node created meanwhile keeps a
// shared_ptr to it (Node::module_scope). Records are immutable and shared, so a node pays one
// pointer copy, and nothing at all while no scope is active (the pointer is null). core knows
// nothing about modules: nn/ creates the records and pushes them (nn/inspect.h: RecordScopes).
#pragma once
#include <memory>
#include <string>

namespace nabla::inspect {

struct ModuleScope {
  std::string path;  // as in named_modules(); "" for the root module
  std::string type;  // the module's type name, e.g. "Linear"
  int depth = 0;     // call nesting: the root is 0, a module its forward calls is 1, ...
  std::shared_ptr<const ModuleScope> parent;  // the scope that called this one (null for root)

  // "layers.0.linear1", or "<root>" for the root module.
  std::string display() const { return path.empty() ? "<root>" : path; }
  // The enclosing scope at `level` (this one if depth <= level).
  const ModuleScope* ancestor_at(int level) const;
};

// The scope ops running on this thread are recorded in (null outside every module forward).
const std::shared_ptr<const ModuleScope>& current_module_scope();

// Makes `scope` current for its lifetime, then restores the previous one.
class ModuleScopePush {
 public:
  explicit ModuleScopePush(std::shared_ptr<const ModuleScope> scope);
  ~ModuleScopePush();
  ModuleScopePush(const ModuleScopePush&) = delete;
  ModuleScopePush& operator=(const ModuleScopePush&) = delete;

 private:
  std::shared_ptr<const ModuleScope> previous_;
};

}  // namespace nabla::inspect
