// optim::Optimizer: parameter groups, the step loop, and the flat state_dict.
#include "nabla/optim/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"

namespace nabla::optim {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// "state.12.exp_avg" -> {"state", 12, "exp_avg"}; false if the key does not have that form.
bool split_key(const std::string& key, std::string& head, size_t& index, std::string& field) {
  size_t a = key.find('.');
  if (a == std::string::npos) return false;
  size_t b = key.find('.', a + 1);
  if (b == std::string::npos || b == a + 1 || b + 1 == key.size()) return false;
  std::string digits = key.substr(a + 1, b - a - 1);
  if (digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  head = key.substr(0, a);
  index = std::stoul(digits);
  field = key.substr(b + 1);
  return true;
}

bool is_scalar_of(const Tensor& t, DType dt) {
  return t.defined() && t.dim() == 0 && t.dtype() == dt;
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double default_lr,
                     double default_weight_decay)
    : name_(std::move(name)), groups_(std::move(groups)) {
  if (!(default_lr >= 0))
    throw ValueError(fmt::format("{}: invalid learning rate {}", name_, default_lr));
  if (!(default_weight_decay >= 0))
    throw ValueError(fmt::format("{}: invalid weight_decay {}", name_, default_weight_decay));
  std::set<const TensorImpl*> seen;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    if (group.lr < 0) group.lr = default_lr;
    if (group.weight_decay < 0) group.weight_decay = default_weight_decay;
    if (std::isnan(group.lr) || std::isnan(group.weight_decay))
      throw ValueError(fmt::format("{}: group {} has a NaN lr or weight_decay", name_, g));
    for (const Tensor& p : group.params) {
      if (!p.defined())
        throw ValueError(fmt::format("{}: parameter {} (group {}) is undefined", name_, index, g));
      if (!is_floating(p.dtype()))
        throw DTypeError(fmt::format("{}: parameter {} (group {}) has dtype {}; expected floating",
                                     name_, index, g, dtype_name(p.dtype())));
      if (!p.is_leaf())
        throw ValueError(
            fmt::format("{}: parameter {} (group {}) is not a leaf tensor", name_, index, g));
      if (!p.is_contiguous())
        throw ValueError(fmt::format("{}: parameter {} (group {}) of shape {} is not contiguous",
                                     name_, index, g, shape_str(p.shape())));
      if (!seen.insert(&p.impl()).second)
        throw ValueError(fmt::format(
            "{}: parameter {} (group {}) appears more than once in the parameter groups", name_,
            index, g));
      ++index;
    }
  }
  if (index == 0) throw ValueError(fmt::format("{}: got an empty parameter list", name_));
  state_.resize(index);
}

const ParamState& Optimizer::state(size_t i) const {
  if (i >= state_.size())
    throw IndexError(fmt::format("{}.state: parameter index {} is out of range for {} parameters",
                                 name_, i, state_.size()));
  return state_[i];
}

void Optimizer::step() {
  NoGradGuard no_grad;
  inspect::OpScope op_scope("optimizer.step", {});  // one event around the whole update
  // Validate every gradient before touching any parameter.
  size_t index = 0;
  for (const ParamGroup& group : groups_)
    for (const Tensor& p : group.params) {
      Tensor g = p.grad();
      if (g.defined() && (g.dtype() != p.dtype() || g.shape() != p.shape()))
        throw DTypeError(fmt::format("{}.step: parameter {} is {} {} but its gradient is {} {}",
                                     name_, index, dtype_name(p.dtype()), shape_str(p.shape()),
                                     dtype_name(g.dtype()), shape_str(g.shape())));
      ++index;
    }
  index = 0;
  for (const ParamGroup& group : groups_) {
    std::vector<ParamUpdate> updates;
    for (const Tensor& p : group.params) {
      ParamState& st = state_[index++];
      Tensor g = p.grad();
      if (g.defined()) updates.push_back({p, g.contiguous(), &st});
    }
    if (updates.empty()) continue;
    update_group(group, updates);
    // Saved tensors that alias a parameter must see the change.
    for (const ParamUpdate& u : updates) u.param.storage()->bump_version();
  }
}

void Optimizer::update_group(const ParamGroup& group, const std::vector<ParamUpdate>& updates) {
  for (const ParamUpdate& u : updates) {
    Tensor param = u.param;
    update(group, param, u.grad, *u.state);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const ParamGroup& group : groups_)
    for (const Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        Tensor(p).set_grad(Tensor());
      } else if (!g.is_leaf()) {  // a grad recorded under create_graph: drop its history
        Tensor(p).set_grad(zeros_like(g));
      } else {
        g.zero_();
      }
    }
}

// ----------------------------------------------------------------------------
// state_dict

NamedTensors Optimizer::state_dict() const {
  NoGradGuard no_grad;
  NamedTensors out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [key, t] : state_[i])
      out.emplace_back(fmt::format("state.{}.{}", i, key), t.clone());
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    const std::string prefix = fmt::format("param_groups.{}.", g);
    out.emplace_back(prefix + "lr", scalar_tensor(group.lr, kFloat64));
    out.emplace_back(prefix + "weight_decay", scalar_tensor(group.weight_decay, kFloat64));
    if (group.initial_lr >= 0)
      out.emplace_back(prefix + "initial_lr", scalar_tensor(group.initial_lr, kFloat64));
    const auto n = static_cast<int64_t>(group.params.size());
    out.emplace_back(prefix + "params",
                     arange(static_cast<double>(index),
                            static_cast<double>(index) + static_cast<double>(n), 1.0, kInt64));
    index += group.params.size();
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& dict) {
  std::vector<const Tensor*> params;
  for (const ParamGroup& group : groups_)
    for (const Tensor& p : group.params) params.push_back(&p);
  const std::vector<std::string> keys = state_keys();

  std::vector<std::string> problems;
  std::vector<ParamState> new_state(state_.size());
  std::vector<std::map<std::string, const Tensor*>> group_fields(groups_.size());
  for (const auto& [key, t] : dict) {
    std::string head, field;
    size_t i = 0;
    if (!split_key(key, head, i, field) || (head != "state" && head != "param_groups")) {
      problems.push_back(fmt::format("unexpected key '{}'", key));
    } else if (!t.defined()) {
      problems.push_back(fmt::format("'{}' is undefined", key));
    } else if (head == "param_groups") {
      if (i >= groups_.size())
        problems.push_back(
            fmt::format("'{}': group {} is out of range for {} groups", key, i, groups_.size()));
      else if (field != "lr" && field != "weight_decay" && field != "initial_lr" &&
               field != "params")
        problems.push_back(fmt::format("unexpected key '{}'", key));
      else
        group_fields[i][field] = &t;
    } else if (i >= params.size()) {
      problems.push_back(fmt::format("'{}': parameter {} is out of range for {} parameters", key, i,
                                     params.size()));
    } else if (std::find(keys.begin(), keys.end(), field) == keys.end()) {
      problems.push_back(fmt::format("unexpected state key '{}' for {}", key, name_));
    } else if (field == "step" ? !is_scalar_of(t, kInt64)
                               : (t.shape() != params[i]->shape() || !is_floating(t.dtype()))) {
      problems.push_back(fmt::format("'{}' is {} {}, expected {} {}", key, dtype_name(t.dtype()),
                                     shape_str(t.shape()),
                                     field == "step" ? "int64" : dtype_name(params[i]->dtype()),
                                     field == "step" ? "()" : shape_str(params[i]->shape())));
    } else {
      new_state[i][field] = t;
    }
  }
  for (size_t i = 0; i < new_state.size(); ++i)
    if (!new_state[i].empty() && new_state[i].size() != keys.size())
      problems.push_back(fmt::format("state of parameter {} has {} of the keys {}", i,
                                     new_state[i].size(), join(keys, ", ")));
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    auto& f = group_fields[g];
    for (const char* field : {"lr", "weight_decay"})
      if (!f.count(field) || !is_scalar_of(*f[field], kFloat64))
        problems.push_back(
            fmt::format("param_groups.{}.{} is missing or not a 0-d float64", g, field));
    if (f.count("initial_lr") && !is_scalar_of(*f["initial_lr"], kFloat64))
      problems.push_back(fmt::format("param_groups.{}.initial_lr is not a 0-d float64", g));
    const auto n = static_cast<int64_t>(groups_[g].params.size());
    Tensor expected = arange(static_cast<double>(index),
                             static_cast<double>(index) + static_cast<double>(n), 1.0, kInt64);
    index += groups_[g].params.size();
    const Tensor* ids = f.count("params") ? f["params"] : nullptr;
    if (!ids || ids->dtype() != kInt64 || ids->shape() != expected.shape() ||
        ids->to_vector<int64_t>() != expected.to_vector<int64_t>())
      problems.push_back(fmt::format(
          "param_groups.{}.params does not match this optimizer's group of {} parameters", g, n));
  }
  if (!problems.empty())
    throw ValueError(fmt::format("{}.load_state_dict: {}", name_, join(problems, "; ")));

  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    auto& f = group_fields[g];
    groups_[g].lr = f["lr"]->item<double>();
    groups_[g].weight_decay = f["weight_decay"]->item<double>();
    groups_[g].initial_lr = f.count("initial_lr") ? f["initial_lr"]->item<double>() : -1.0;
  }
  for (size_t i = 0; i < new_state.size(); ++i)
    for (auto& [key, t] : new_state[i]) {
      const DType dt = key == "step" ? kInt64 : params[i]->dtype();
      t = t.dtype() == dt ? t.detach().clone() : t.detach().to(dt);
    }
  state_ = std::move(new_state);
}

int64_t increment_step(ParamState& state) {
  Tensor& step = state["step"];
  if (!step.defined()) step = zeros({}, kInt64);
  return ++*step.data_ptr<int64_t>();
}

}  // namespace nabla::optim
