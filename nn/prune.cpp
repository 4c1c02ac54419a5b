// Magnitude masks and attention-head pruning (nn/prune.h).
#include "nabla/nn/prune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/nn/multihead_attention.h"
#include "nabla/ops/arithmetic.h"

namespace nabla::nn::prune {
namespace {

struct Found {
  Module* owner;
  std::string leaf;  // the parameter's name within owner
  Tensor param;
};

Module* find_module(Module& root, const std::string& path) {
  if (path.empty()) return &root;
  for (auto& [name, m] : root.named_modules())
    if (name == path) return m.get();
  return nullptr;
}

Found find_param(Module& root, const std::string& dotted, const char* fn) {
  const size_t dot = dotted.rfind('.');
  const std::string path = dot == std::string::npos ? "" : dotted.substr(0, dot);
  const std::string leaf = dot == std::string::npos ? dotted : dotted.substr(dot + 1);
  if (Module* owner = find_module(root, path))
    for (auto& [name, p] : owner->named_parameters(false))
      if (name == leaf) {
        if (!is_floating(p.dtype()))
          throw DTypeError(fmt::format("prune.{}: parameter '{}' is {}, not floating", fn, dotted,
                                       dtype_name(p.dtype())));
        return {owner, leaf, p};
      }
  throw ValueError(fmt::format("prune.{}: {} has no parameter '{}'", fn, root.name(), dotted));
}

Tensor find_mask(const Module& owner, const std::string& leaf) {
  for (auto& [name, b] : owner.named_buffers(false))
    if (name == leaf + "_mask") return b;
  return Tensor();
}

void check_amount(const char* fn, double amount) {
  if (!(amount >= 0.0 && amount <= 1.0))
    throw ValueError(fmt::format("prune.{}: amount must be in [0, 1], got {}", fn, amount));
}

// p <- p * mask in place (the parameter's handle and version counter, not its graph).
void multiply_in_place(const Tensor& p, const Tensor& mask) {
  NoGradGuard no_grad;
  Tensor data = p.detach();
  data.copy_(mul(data, mask));
}

// Installs `mask` (already combined with any earlier one) on the parameter.
void install(const Found& f, const Tensor& mask) {
  Tensor existing = find_mask(*f.owner, f.leaf);
  if (existing.defined()) {
    NoGradGuard no_grad;
    existing.copy_(mask);
  } else {
    existing = f.owner->register_buffer(f.leaf + "_mask", mask.contiguous().clone());
    // The gradient PyTorch gives weight_orig; remove() swaps the mask's data for ones.
    f.param.register_hook([m = existing](const Tensor& g) { return mul(g, m); });
  }
  multiply_in_place(f.param, existing);
}

// Zeroes the round(amount * alive) alive entries of smallest score (ties: lower index first).
std::vector<double> smallest_off(const std::vector<double>& score, std::vector<double> keep,
                                 double amount) {
  std::vector<size_t> alive;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i] != 0.0) alive.push_back(i);
  const auto count = static_cast<size_t>(std::llround(amount * static_cast<double>(alive.size())));
  std::stable_sort(alive.begin(), alive.end(),
                   [&](size_t a, size_t b) { return score[a] < score[b]; });
  for (size_t i = 0; i < count; ++i) keep[alive[i]] = 0.0;
  return keep;
}

std::vector<double> abs_values(const Tensor& p) {
  std::vector<double> v = p.detach().to(kFloat64).contiguous().to_vector<double>();
  for (double& x : v) x = std::abs(x);
  return v;
}

std::vector<double> current_mask(const Found& f) {
  Tensor m = find_mask(*f.owner, f.leaf);
  if (!m.defined()) return std::vector<double>(static_cast<size_t>(f.param.numel()), 1.0);
  return m.to(kFloat64).contiguous().to_vector<double>();
}

Tensor as_mask(const std::vector<double>& v, const Tensor& like) {
  return from_vector(v, like.shape()).to(like.dtype());
}

std::vector<MultiheadAttention*> attention_modules(Module& root) {
  std::vector<MultiheadAttention*> out;
  if (auto* self = dynamic_cast<MultiheadAttention*>(&root)) out.push_back(self);
  for (auto& [name, m] : root.named_modules())
    if (auto* mha = dynamic_cast<MultiheadAttention*>(m.get())) out.push_back(mha);
  return out;
}

}  // namespace

void l1_unstructured(Module& root, const std::string& param, double amount) {
  check_amount("l1_unstructured", amount);
  Found f = find_param(root, param, "l1_unstructured");
  install(f, as_mask(smallest_off(abs_values(f.param), current_mask(f), amount), f.param));
}

void global_unstructured(Module& root, const std::vector<std::string>& params, double amount) {
  check_amount("global_unstructured", amount);
  std::vector<Found> found;
  std::vector<double> score, keep;
  for (const std::string& name : params) {
    found.push_back(find_param(root, name, "global_unstructured"));
    std::vector<double> s = abs_values(found.back().param), k = current_mask(found.back());
    score.insert(score.end(), s.begin(), s.end());
    keep.insert(keep.end(), k.begin(), k.end());
  }
  keep = smallest_off(score, std::move(keep), amount);
  size_t at = 0;
  for (const Found& f : found) {
    const auto n = static_cast<size_t>(f.param.numel());
    std::vector<double> part(keep.begin() + static_cast<std::ptrdiff_t>(at),
                             keep.begin() + static_cast<std::ptrdiff_t>(at + n));
    install(f, as_mask(part, f.param));
    at += n;
  }
}

void custom_from_mask(Module& root, const std::string& param, const Tensor& mask) {
  Found f = find_param(root, param, "custom_from_mask");
  if (!mask.defined() || mask.shape() != f.param.shape())
    throw ShapeError(fmt::format("prune.custom_from_mask: mask {} for parameter '{}' {}",
                                 mask.defined() ? shape_str(mask.shape()) : "undefined", param,
                                 shape_str(f.param.shape())));
  std::vector<double> m = mask.to(kFloat64).contiguous().to_vector<double>();
  for (double v : m)
    if (v != 0.0 && v != 1.0)
      throw ValueError(
          fmt::format("prune.custom_from_mask: mask for '{}' holds {}, not 0 or 1", param, v));
  std::vector<double> keep = current_mask(f);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] *= m[i];
  install(f, as_mask(keep, f.param));
}

bool is_pruned(const Module& root, const std::string& param) {
  Found f = find_param(const_cast<Module&>(root), param, "is_pruned");
  return find_mask(*f.owner, f.leaf).defined();
}

void reapply(Module& root) {
  std::vector<Module*> modules{&root};
  for (auto& [name, m] : root.named_modules()) modules.push_back(m.get());
  for (Module* m : modules)
    for (auto& [name, p] : m->named_parameters(false))
      if (Tensor mask = find_mask(*m, name); mask.defined()) multiply_in_place(p, mask);
}

void remove(Module& root, const std::string& param) {
  Found f = find_param(root, param, "remove");
  Tensor mask = find_mask(*f.owner, f.leaf);
  if (!mask.defined())
    throw ValueError(fmt::format("prune.remove: parameter '{}' is not pruned", param));
  multiply_in_place(f.param, mask);
  // The gradient hook holds this handle: ones make it a no-op; state_dict() snapshots taken
  // earlier keep the old storage.
  set_data_(mask, ones_like(mask));
  f.owner->remove_buffer(f.leaf + "_mask");
}

int restore_masks(Module& root, const StateDict& dict) {
  int n = 0;
  const std::string suffix = "_mask";
  for (const auto& [key, value] : dict) {
    if (key.size() <= suffix.size() || !key.ends_with(suffix)) continue;
    const std::string param = key.substr(0, key.size() - suffix.size());
    Found f = find_param(root, param, "restore_masks");
    if (find_mask(*f.owner, f.leaf).defined()) continue;
    custom_from_mask(root, param, value.to(f.param.dtype()));
    ++n;
  }
  return n;
}

std::vector<std::string> linear_weights(const Module& root) {
  std::vector<std::string> out;
  auto visit = [&](const std::string& prefix, const Module& m) {
    for (auto& [name, p] : m.named_parameters(false)) {
      const bool linear = m.name() == "Linear" && name == "weight";
      const bool attention = m.name() == "MultiheadAttention" && name.ends_with("proj_weight");
      if ((linear || attention) && p.dim() == 2) out.push_back(prefix + name);
    }
  };
  visit("", root);
  for (auto& [path, m] : root.named_modules()) visit(path + ".", *m);
  return out;
}

double sparsity(const Tensor& t) {
  if (t.numel() == 0) return 0.0;
  std::vector<double> v = t.detach().to(kFloat64).contiguous().to_vector<double>();
  return static_cast<double>(std::count(v.begin(), v.end(), 0.0)) / static_cast<double>(v.size());
}

// ------------------------------------------------------------------------------------------------
// Head gates
struct HeadGates::Layer {
  std::string name;
  MultiheadAttention* mha;
  Tensor gate;
  HookHandle handle;
};

HeadGates::HeadGates(Module& root, bool requires_grad) {
  std::vector<std::pair<std::string, MultiheadAttention*>> found;
  if (auto* self = dynamic_cast<MultiheadAttention*>(&root)) found.emplace_back("", self);
  for (auto& [name, m] : root.named_modules())
    if (auto* mha = dynamic_cast<MultiheadAttention*>(m.get())) found.emplace_back(name, mha);
  for (auto& [name, mha] : found) {
    auto layer = std::make_shared<Layer>();
    layer->name = name;
    layer->mha = mha;
    const DType dt = mha->out_proj()->weight().dtype();
    layer->gate = ones({mha->num_heads()}, dt);
    if (requires_grad) layer->gate.requires_grad_();
    std::weak_ptr<Layer> weak = layer;
    layer->handle = mha->out_proj()->register_forward_pre_hook(
        [weak](const Module&, const std::vector<Tensor>& in) -> HookResult {
          auto l = weak.lock();
          if (!l) return std::nullopt;
          const int64_t H = l->gate.numel(), d = l->mha->head_dim();
          if (in[0].size(-1) != H * d)
            throw ShapeError(fmt::format(
                "prune.HeadGates: '{}' has {} heads of {} but the gates are for {}; destroy the "
                "gates before pruning heads",
                l->name, l->mha->num_heads(), d, H));
          Tensor g = l->gate.unsqueeze(1).expand({H, d}).reshape({H * d});
          return std::vector<Tensor>{mul(in[0], g)};
        });
    layers_.push_back(layer);
  }
}

HeadGates::~HeadGates() {
  for (auto& l : layers_) l->handle.remove();
}

size_t HeadGates::layers() const { return layers_.size(); }
const std::string& HeadGates::layer_name(size_t layer) const { return layers_.at(layer)->name; }
const Tensor& HeadGates::gate(size_t layer) const { return layers_.at(layer)->gate; }

void HeadGates::set_gate(size_t layer, const std::vector<double>& values) {
  Layer& l = *layers_.at(layer);
  if (static_cast<int64_t>(values.size()) != l.gate.numel())
    throw ShapeError(fmt::format("prune.HeadGates.set_gate: {} values for {} heads of '{}'",
                                 values.size(), l.gate.numel(), l.name));
  const bool grad = l.gate.requires_grad();
  l.gate = from_vector(values, {l.gate.numel()}).to(l.gate.dtype());
  if (grad) l.gate.requires_grad_();
}

std::vector<std::vector<double>> HeadGates::importance() const {
  std::vector<std::vector<double>> out;
  for (const auto& l : layers_) {
    std::vector<double> v(static_cast<size_t>(l->gate.numel()), 0.0);
    if (l->gate.grad().defined()) v = abs_values(l->gate.grad());
    const double norm = std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0));
    if (norm > 0)
      for (double& x : v) x /= norm;
    out.push_back(v);
  }
  return out;
}

std::vector<std::vector<int64_t>> prune_heads_by_importance(
    Module& root, const std::vector<std::vector<double>>& importance, int64_t heads_per_layer) {
  std::vector<MultiheadAttention*> mhas = attention_modules(root);
  if (importance.size() != mhas.size())
    throw ShapeError(
        fmt::format("prune.prune_heads_by_importance: {} importance rows for {} "
                    "attention modules",
                    importance.size(), mhas.size()));
  if (heads_per_layer < 0)
    throw ValueError(
        fmt::format("prune.prune_heads_by_importance: heads_per_layer {} < 0", heads_per_layer));
  std::vector<std::vector<int64_t>> removed;
  for (size_t i = 0; i < mhas.size(); ++i) {
    const int64_t H = mhas[i]->num_heads();
    if (static_cast<int64_t>(importance[i].size()) != H)
      throw ShapeError(
          fmt::format("prune.prune_heads_by_importance: layer {} has {} heads, "
                      "importance has {}",
                      i, H, importance[i].size()));
    std::vector<int64_t> order(static_cast<size_t>(H));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return importance[i][static_cast<size_t>(a)] < importance[i][static_cast<size_t>(b)];
    });
    order.resize(static_cast<size_t>(std::min(heads_per_layer, H - 1)));
    std::sort(order.begin(), order.end());
    mhas[i]->prune_heads(order);
    removed.push_back(order);
  }
  return removed;
}

}  // namespace nabla::nn::prune
