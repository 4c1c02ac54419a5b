// gradient_report (see report.h).
#include "nabla/core/inspect/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "nabla/core/copy.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/graph.h"

namespace nabla::inspect {

namespace {

double difference_norm(const Tensor& a, const Tensor& b) {
  Tensor da = empty(a.shape(), kFloat64), db = empty(b.shape(), kFloat64);
  copy_kernel(da, a);
  copy_kernel(db, b);
  const double* pa = da.data_ptr<double>();
  const double* pb = db.data_ptr<double>();
  double sum = 0;
  for (int64_t i = 0; i < da.numel(); ++i) sum += (pa[i] - pb[i]) * (pa[i] - pb[i]);
  return std::sqrt(sum);
}

}  // namespace

NamedTensors snapshot(const NamedTensors& params) {
  NamedTensors out;
  for (const auto& [name, t] : params) {
    Tensor copy = empty(t.shape(), t.dtype());
    copy_kernel(copy, t);
    out.emplace_back(name, copy);
  }
  return out;
}

GradientReport gradient_report(const NamedTensors& params, const CutRecorder* recorder,
                               const NamedTensors* before_step) {
  if (before_step && before_step->size() != params.size())
    throw ValueError(fmt::format("gradient_report: {} parameters but a snapshot of {}",
                                 params.size(), before_step->size()));
  GradientReport report;
  std::vector<Tensor> missing;
  std::vector<size_t> missing_index;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    if (!p.defined()) throw ValueError(fmt::format("gradient_report: '{}' is undefined", name));
    ParameterGradient r;
    r.name = name;
    r.shape = p.shape();
    r.weight_norm = l2_norm(p);
    Tensor g = p.grad();
    r.has_grad = g.defined();
    if (r.has_grad) {
      r.grad_norm = l2_norm(g);
      r.finite = std::isfinite(r.grad_norm);
    } else if (!p.requires_grad()) {
      r.why.emplace().kind = NoGradientReason::Kind::Frozen;
    } else {
      missing.push_back(p);
      missing_index.push_back(i);
    }
    if (before_step) {
      const auto& [old_name, old] = (*before_step)[i];
      if (old_name != name || old.shape() != p.shape())
        throw ValueError(fmt::format(
            "gradient_report: snapshot entry {} is '{}' {} but the parameter is '{}' {}", i,
            old_name, shape_str(old.shape()), name, shape_str(p.shape())));
      const double old_norm = l2_norm(old), change = difference_norm(p, old);
      r.update_ratio = old_norm > 0  ? change / old_norm
                       : change == 0 ? 0.0
                                     : std::numeric_limits<double>::infinity();
    }
    report.parameters.push_back(std::move(r));
  }
  std::vector<NoGradientReason> reasons =
      recorder ? recorder->explain(missing) : std::vector<NoGradientReason>(missing.size());
  for (size_t k = 0; k < missing.size(); ++k) report.parameters[missing_index[k]].why = reasons[k];
  if (recorder) report.first_non_finite = recorder->first_non_finite();
  return report;
}

const ParameterGradient& GradientReport::at(const std::string& name) const {
  for (const ParameterGradient& p : parameters)
    if (p.name == name) return p;
  throw ValueError(fmt::format("GradientReport::at: no parameter named '{}'", name));
}

std::string GradientReport::to_string() const {
  size_t name_w = 9, shape_w = 5;
  for (const ParameterGradient& p : parameters) {
    name_w = std::max(name_w, p.name.size());
    shape_w = std::max(shape_w, shape_str(p.shape).size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>10}  {:>13}  {}\n", "parameter", name_w,
                                "shape", shape_w, "|grad|", "update/weight", "note");
  for (const ParameterGradient& p : parameters) {
    const std::string norm = p.has_grad ? fmt::format("{:.3e}", p.grad_norm) : "-";
    const std::string ratio = p.update_ratio ? fmt::format("{:.3e}", *p.update_ratio) : "-";
    std::string note;
    if (p.why)
      note = "no gradient: " + p.why->describe();
    else if (!p.finite)
      note = "non-finite gradient";
    std::string line = fmt::format("{:<{}}  {:<{}}  {:>10}  {:>13}  {}", p.name, name_w,
                                   shape_str(p.shape), shape_w, norm, ratio, note);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (first_non_finite) out += first_non_finite->describe() + "\n";
  return out;
}

}  // namespace nabla::inspect
