// Seeing inside a model's autograd graph (core/inspect/ holds the model-agnostic parts):
//   - RecordScopes: while alive, every module forward run on this thread records its dotted
//     path (as in named_modules(); the root is ""), and every node created inside keeps it, so
//     graph pictures group nodes by module and can collapse a layer into one box;
//   - export_graph: the graph below some outputs, leaves named by the model's parameters;
//   - GradientMonitor: the gradient report of one step (gradient norms, update/weight ratios,
//     why a parameter got no gradient, the first non-finite gradient).
// All of it is off unless one of these objects is alive.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nabla/core/inspect/cuts.h"
#include "nabla/core/inspect/dot.h"
#include "nabla/core/inspect/graph.h"
#include "nabla/core/inspect/render.h"
#include "nabla/core/inspect/report.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

class RecordScopes {
 public:
  // Paths come from root.named_modules() as it is now; modules outside root record no scope.
  explicit RecordScopes(const Module& root);
  ~RecordScopes();
  RecordScopes(const RecordScopes&) = delete;
  RecordScopes& operator=(const RecordScopes&) = delete;

 private:
  std::unique_ptr<detail::ScopeTable> table_;
  detail::ScopeTable* previous_;
};

// inspect::export_graph with the leaves named by model.named_parameters().
inspect::Graph export_graph(const std::vector<Tensor>& outputs, const Module& model,
                            const inspect::GradientProbe* gradients = nullptr);

// One training step's gradient report:
//   GradientMonitor monitor(model);     // records scopes, cuts and the first non-finite gradient
//   Tensor loss = ...; loss.backward();
//   monitor.snapshot_before_step();     // stops recording, copies the parameters
//   optimizer.step();
//   std::cout << monitor.report().to_string();
// report() may also be called right after the backward (no update ratios then).
class GradientMonitor {
 public:
  explicit GradientMonitor(const Module& model);
  GradientMonitor(const GradientMonitor&) = delete;
  GradientMonitor& operator=(const GradientMonitor&) = delete;

  void stop();  // ends recording; idempotent
  void snapshot_before_step();
  inspect::GradientReport report() const;

 private:
  const Module& model_;
  std::optional<RecordScopes> scopes_;
  inspect::CutRecorder recorder_;
  std::optional<inspect::NamedTensors> before_step_;
};

}  // namespace nabla::nn
