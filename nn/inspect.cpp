// RecordScopes, export_graph with parameter names, GradientMonitor (see inspect.h).
#include "nabla/nn/inspect.h"

#include <map>
#include <unordered_map>
#include <utility>

namespace nabla::nn {

namespace detail {

constinit thread_local ScopeTable* scope_table = nullptr;

// Module -> path, and the scope records handed out, one per (module, calling scope): a module
// called from the same place every step reuses its record.
struct ScopeTable {
  std::unordered_map<const Module*, std::string> paths;
  std::map<std::pair<const Module*, const inspect::ModuleScope*>,
           std::shared_ptr<const inspect::ModuleScope>>
      records;
};

std::shared_ptr<const inspect::ModuleScope> scope_for_call(const Module& m) {
  ScopeTable& table = *scope_table;
  auto path = table.paths.find(&m);
  if (path == table.paths.end()) return nullptr;
  const std::shared_ptr<const inspect::ModuleScope>& parent = inspect::current_module_scope();
  auto& record = table.records[{&m, parent.get()}];
  if (!record)
    record = std::make_shared<const inspect::ModuleScope>(
        inspect::ModuleScope{path->second, m.name(), parent ? parent->depth + 1 : 0, parent});
  return record;
}

}  // namespace detail

RecordScopes::RecordScopes(const Module& root) : table_(std::make_unique<detail::ScopeTable>()) {
  table_->paths.emplace(&root, "");
  for (const auto& [path, module] : root.named_modules()) table_->paths.emplace(module.get(), path);
  previous_ = std::exchange(detail::scope_table, table_.get());
}

RecordScopes::~RecordScopes() {
  if (detail::scope_table == table_.get()) detail::scope_table = previous_;
}

inspect::Graph export_graph(const std::vector<Tensor>& outputs, const Module& model,
                            const inspect::GradientProbe* gradients) {
  inspect::GraphOptions options;
  options.names = model.named_parameters();
  options.gradients = gradients;
  return inspect::export_graph(outputs, options);
}

GradientMonitor::GradientMonitor(const Module& model)
    : model_(model), scopes_(std::in_place, model) {}

void GradientMonitor::stop() {
  recorder_.stop();
  scopes_.reset();
}

void GradientMonitor::snapshot_before_step() {
  stop();
  before_step_ = inspect::snapshot(model_.named_parameters());
}

inspect::GradientReport GradientMonitor::report() const {
  return inspect::gradient_report(model_.named_parameters(), &recorder_,
                                  before_step_ ? &*before_step_ : nullptr);
}

}  // namespace nabla::nn
