// nn::Module: registration, traversal with dotted names, modes, state_dict and summary.
#include "nabla/nn/module.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"

namespace nabla::nn {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string dotted(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

// ----------------------------------------------------------------------------
// registration

void Module::check_new_name(const char* what, const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(fmt::format("{}.{}: invalid name '{}' (must be non-empty, without '.')",
                                 type_name_, what, name));
  auto taken = [&](const auto& list, auto key) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return key(e) == name; });
  };
  if (taken(params_, [](const auto& p) { return p.first; }) ||
      taken(buffers_, [](const Buffer& b) { return b.name; }) ||
      taken(children_, [](const auto& c) { return c.first; }))
    throw ValueError(fmt::format("{}.{}: name '{}' is already registered in this module",
                                 type_name_, what, name));
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name("register_parameter", name);
  if (!t.defined())
    throw ValueError(
        fmt::format("{}.register_parameter: '{}' is an undefined tensor", type_name_, name));
  if (!t.is_leaf())
    throw ValueError(fmt::format(
        "{}.register_parameter: '{}' has autograd history; register a leaf (use detach())",
        type_name_, name));
  if (!is_floating(t.dtype()))
    throw DTypeError(
        fmt::format("{}.register_parameter: '{}' has dtype {}; parameters are floating", type_name_,
                    name, dtype_name(t.dtype())));
  t.requires_grad_(requires_grad);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name("register_buffer", name);
  if (!t.defined())
    throw ValueError(
        fmt::format("{}.register_buffer: '{}' is an undefined tensor", type_name_, name));
  buffers_.push_back({name, t, persistent});
  return t;
}

bool Module::remove_buffer(const std::string& name) {
  auto it = std::find_if(buffers_.begin(), buffers_.end(),
                         [&](const Buffer& b) { return b.name == name; });
  if (it == buffers_.end()) return false;
  buffers_.erase(it);
  return true;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  if (!module) throw ValueError(fmt::format("{}.register_module: '{}' is null", type_name_, name));
  if (module.get() == this)
    throw ValueError(
        fmt::format("{}.register_module: '{}' cannot register itself", type_name_, name));
  children_.emplace_back(name, std::move(module));
}

// ----------------------------------------------------------------------------
// traversal

// A tensor reachable twice (a shared submodule, tied weights) is listed once, under its first
// name, as PyTorch's named_parameters() does; state_dict() lists every name.
void Module::collect_parameters(const std::string& prefix, bool recurse, StateDict& out,
                                std::set<const TensorImpl*>& seen) const {
  for (const auto& [name, t] : params_)
    if (seen.insert(t.impl_ptr().get()).second) out.emplace_back(dotted(prefix, name), t);
  if (recurse)
    for (const auto& [name, child] : children_)
      child->collect_parameters(dotted(prefix, name), true, out, seen);
}

void Module::collect_buffers(const std::string& prefix, bool recurse, StateDict& out,
                             std::set<const TensorImpl*>& seen) const {
  for (const Buffer& b : buffers_)
    if (seen.insert(b.value.impl_ptr().get()).second)
      out.emplace_back(dotted(prefix, b.name), b.value);
  if (recurse)
    for (const auto& [name, child] : children_)
      child->collect_buffers(dotted(prefix, name), true, out, seen);
}

// PyTorch's order: a module's parameters, then its buffers, then each child in turn.
void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(dotted(prefix, name), t.detach());
  for (const Buffer& b : buffers_)
    if (b.persistent) out.emplace_back(dotted(prefix, b.name), b.value.detach());
  for (const auto& [name, child] : children_) child->collect_state(dotted(prefix, name), out);
}

StateDict Module::named_parameters(bool recurse) const {
  StateDict out;
  std::set<const TensorImpl*> seen;
  collect_parameters("", recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

StateDict Module::named_buffers(bool recurse) const {
  StateDict out;
  std::set<const TensorImpl*> seen;
  collect_buffers("", recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::set<const Module*> seen = {this};
  // Depth-first over (prefix, module); a module reachable twice is listed once, as in PyTorch.
  std::function<void(const std::string&, const Module&)> visit = [&](const std::string& prefix,
                                                                     const Module& m) {
    for (const auto& [name, child] : m.children_) {
      if (!seen.insert(child.get()).second) continue;
      out.emplace_back(dotted(prefix, name), child);
      visit(dotted(prefix, name), *child);
    }
  };
  visit("", *this);
  return out;
}

// ----------------------------------------------------------------------------
// modes and gradients

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) t.set_grad(Tensor());
}

// ----------------------------------------------------------------------------
// state

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

void Module::load_state_dict(const StateDict& dict, bool strict) {
  std::map<std::string, const Tensor*> given;
  std::vector<std::string> duplicates;
  for (const auto& [key, t] : dict)
    if (!given.emplace(key, &t).second) duplicates.push_back(key);

  StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched, wrong_dtype;
  std::map<std::string, bool> known;
  for (const auto& [key, t] : own) {
    known[key] = true;
    auto it = given.find(key);
    if (it == given.end()) {
      missing.push_back(key);
    } else if (!it->second->defined()) {
      mismatched.push_back(key + ": the checkpoint tensor is undefined");
    } else if (it->second->shape() != t.shape()) {
      mismatched.push_back(fmt::format("{}: checkpoint {} vs model {}", key,
                                       shape_str(it->second->shape()), shape_str(t.shape())));
    } else if (is_floating(it->second->dtype()) != is_floating(t.dtype())) {
      // Floating dtypes convert (a BF16 file into a float32 model widens exactly); a float
      // into int64/bool or back would be a silent truncation.
      wrong_dtype.push_back(fmt::format("{}: checkpoint {} vs model {}", key,
                                        dtype_name(it->second->dtype()), dtype_name(t.dtype())));
    }
  }
  for (const auto& [key, t] : dict)
    if (!known.count(key)) unexpected.push_back(key);

  std::vector<std::string> problems;
  if (!duplicates.empty()) problems.push_back("duplicate keys: " + join(duplicates, ", "));
  if (strict && !missing.empty()) problems.push_back("missing keys: " + join(missing, ", "));
  if (strict && !unexpected.empty())
    problems.push_back("unexpected keys: " + join(unexpected, ", "));
  if (!mismatched.empty()) problems.push_back("shape mismatch for " + join(mismatched, ", "));
  if (!wrong_dtype.empty())
    problems.push_back("dtype mismatch (floating dtypes convert, others must match) for " +
                       join(wrong_dtype, ", "));
  if (!problems.empty())
    throw ValueError(fmt::format("{}.load_state_dict: {}", type_name_, join(problems, "; ")));

  NoGradGuard no_grad;
  for (auto& [key, t] : own)
    if (auto it = given.find(key); it != given.end()) t.copy_(*it->second);
}

void Module::to(DType dt) {
  if (!is_floating(dt))
    throw DTypeError(
        fmt::format("{}.to: target dtype {} is not floating", type_name_, dtype_name(dt)));
  NoGradGuard no_grad;
  StateDict all = named_parameters();
  for (auto& b : named_buffers()) all.push_back(b);
  for (auto& [name, t] : all) {
    if (!is_floating(t.dtype()) || t.dtype() == dt) continue;
    // NOTE: swap the storage under the existing TensorImpl, as PyTorch's `param.data = ...`,
    // so every handle to the parameter (an optimizer's list) sees the converted tensor.
    set_data_(t, t.detach().to(dt));
  }
}

// ----------------------------------------------------------------------------
// inspection

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

std::string Module::summary() const {
  StateDict params = named_parameters();
  size_t name_w = 5, shape_w = 5;  // at least as wide as the headers
  for (const auto& [name, t] : params) {
    name_w = std::max(name_w, name.size());
    shape_w = std::max(shape_w, shape_str(t.shape()).size());
  }
  const std::string total = fmt::format("{}", num_parameters());
  const size_t count_w = std::max<size_t>(total.size(), 6);
  std::string out = type_name_ + "\n";
  out +=
      fmt::format("{:<{}}  {:<{}}  {:>{}}\n", "name", name_w, "shape", shape_w, "params", count_w);
  for (const auto& [name, t] : params)
    out += fmt::format("{:<{}}  {:<{}}  {:>{}}\n", name, name_w, shape_str(t.shape()), shape_w,
                       t.numel(), count_w);
  out += fmt::format("{:<{}}  {:<{}}  {:>{}}\n", "total", name_w, "", shape_w, total, count_w);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

}  // namespace nabla::nn
