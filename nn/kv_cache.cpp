#include "nabla/nn/kv_cache.h"

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/ops/indexing.h"

namespace nabla::nn {
namespace {

void check_heads(const char* what, const Tensor& k, const Tensor& v) {
  if (k.dim() != 4 || v.dim() != 4 || k.size(0) != v.size(0) || k.size(1) != v.size(1) ||
      k.size(2) != v.size(2))
    throw ShapeError(fmt::format(
        "KVCache::{}: keys and values must be (batch, heads, length, head dim) with one batch, "
        "head count and length, got {} and {}",
        what, shape_str(k.shape()), shape_str(v.shape())));
  if (GradMode::enabled() && (k.requires_grad() || v.requires_grad()))
    throw AutogradError(fmt::format(
        "KVCache::{}: the cache is for inference and keeps no graph, but the keys/values require "
        "grad; decode under NoGradGuard",
        what));
}

}  // namespace

KVCache::KVCache(int64_t max_len) : max_len_(max_len) {
  if (max_len <= 0)
    throw ValueError(fmt::format("KVCache: max_len must be positive, got {}", max_len));
}

KVCache KVCache::static_kv() { return KVCache(0, true); }

std::pair<Tensor, Tensor> KVCache::append(const Tensor& k, const Tensor& v) {
  if (static_)
    throw ValueError("KVCache::append: a static (cross-attention) cache is not appended");
  check_heads("append", k, v);
  const int64_t B = k.size(0), H = k.size(1), l = k.size(2), dk = k.size(3), dv = v.size(3);
  if (length_ + l > max_len_)
    throw ValueError(fmt::format(
        "KVCache::append: {} new positions after the {} cached exceed max_len {}; make the cache "
        "longer or reset it",
        l, length_, max_len_));
  const bool fits = k_.defined() && k_.size(0) == B && k_.size(1) == H && k_.size(3) == dk &&
                    v_.size(3) == dv && k_.dtype() == k.dtype() && v_.dtype() == v.dtype();
  if (!fits && length_ == 0) {  // first step (or first after reset): buffers for this batch
    k_ = nabla::empty({B, H, max_len_, dk}, k.dtype());
    v_ = nabla::empty({B, H, max_len_, dv}, v.dtype());
  } else if (!fits) {
    throw ShapeError(fmt::format(
        "KVCache::append: the cache holds {} keys and {} values of {} per position, got {} {} "
        "and {} {} (another batch or model? reorder or reset the cache)",
        shape_str({k_.size(0), k_.size(1), dk}), shape_str({v_.size(0), v_.size(1), dv}),
        dtype_name(k_.dtype()), shape_str(k.shape()), dtype_name(k.dtype()), shape_str(v.shape()),
        dtype_name(v.dtype())));
  }
  {
    NoGradGuard no_grad;
    k_.narrow(2, length_, l).copy_(k);
    v_.narrow(2, length_, l).copy_(v);
  }
  length_ += l;
  return {keys(), values()};
}

void KVCache::store(const Tensor& k, const Tensor& v) {
  if (!static_) throw ValueError("KVCache::store: only a static (cross-attention) cache is stored");
  check_heads("store", k, v);
  k_ = k.detach();
  v_ = v.detach();
  length_ = max_len_ = k.size(2);
}

Tensor KVCache::keys() const { return k_.defined() ? k_.narrow(2, 0, length_) : Tensor(); }
Tensor KVCache::values() const { return v_.defined() ? v_.narrow(2, 0, length_) : Tensor(); }

void KVCache::reorder(const Tensor& batch_index) {
  if (batch_index.dtype() != kInt64 || batch_index.dim() != 1)
    throw ValueError(
        fmt::format("KVCache::reorder: batch_index must be a 1-D int64 tensor, got {} {}",
                    dtype_name(batch_index.dtype()), shape_str(batch_index.shape())));
  if (!k_.defined()) return;  // nothing cached yet
  const int64_t B = k_.size(0);
  for (int64_t i : batch_index.to_vector<int64_t>())
    if (i < 0 || i >= B)
      throw IndexError(fmt::format(
          "KVCache::reorder: batch_index holds {}, outside the cached batch of {}", i, B));
  NoGradGuard no_grad;
  k_ = index_select(k_, 0, batch_index);
  v_ = index_select(v_, 0, batch_index);
}

void KVCache::reset() {
  length_ = 0;
  if (static_) {
    k_ = v_ = Tensor();
    max_len_ = 0;
  }
}

void TransformerCache::reorder(const Tensor& batch_index) {
  for (auto* caches : {&self_attn, &cross_attn})
    for (KVCache& c : *caches) c.reorder(batch_index);
}

void TransformerCache::reset() {
  for (KVCache& c : self_attn) c.reset();
  cross_attn.clear();
}

void TransformerCache::prepare(size_t layers, bool cross, const char* who) {
  if (self_attn.empty()) {
    for (size_t i = 0; i < layers; ++i) self_attn.emplace_back(max_len);
  } else if (self_attn.size() != layers) {
    throw ValueError(fmt::format("{}: the cache was used with {} layers, this model has {}", who,
                                 self_attn.size(), layers));
  }
  if (cross && cross_attn.empty())
    for (size_t i = 0; i < layers; ++i) cross_attn.push_back(KVCache::static_kv());
}

}  // namespace nabla::nn
