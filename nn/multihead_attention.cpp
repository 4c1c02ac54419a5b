// nn::MultiheadAttention. The computation, with B batch, L query length, S key length, H heads,
// d = E / H:
//   q, k, v   = input projections (one GEMM over the packed weight for self-attention)
//   qh, kh, vh = (B, H, L|S, d) views of them (no copies: matmul reads the strided batch)
//   attn      = masked_softmax(qh / sqrt(d) @ kh^T, merged mask)        (B, H, L, S)
//   output    = out_proj(concat_heads(dropout(attn) @ vh))
// With need_weights = false the middle two lines are one fused scaled_dot_product_attention call
// (ops/attention.h), which never materialises attn, unless L * S is small (MhaOptions::path,
// core/machine.h);
// the dropout masks are the same either way. With a KVCache (MhaOptions::kv_cache, nn/kv_cache.h)
// the keys and values come from the cache: a self-attention cache appends this call's and
// attends over all, a static one holds the memory's after its first call.
#include "nabla/nn/multihead_attention.h"

#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/machine.h"
#include "nabla/nn/init.h"
#include "nabla/nn/quantized.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/attention.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/dropout.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/softmax.h"

namespace nabla::nn {
namespace {

constexpr const char* kOp = "MultiheadAttention";

// The merged mask for scores (B, H, L, S): a keep-mask (Bool) or an additive float mask, either
// broadcastable to the scores; `mask` is undefined when nothing is masked.
struct MergedMask {
  Tensor mask;
  MaskKind kind = MaskKind::Bool;
};

void check_mask_dtype(const char* what, const Tensor& m, DType dt) {
  if (m.dtype() != kBool && m.dtype() != dt)
    throw DTypeError(fmt::format("{}: {} must be bool or {} like the query, got {} {}", kOp, what,
                                 dtype_name(dt), dtype_name(m.dtype()), shape_str(m.shape())));
}

// Sizes of one call: batch, heads, query length, key length.
struct AttnSizes {
  int64_t B, H, L, S;
};

// Validates every mask and merges them: bool parts ("true = not allowed") are or-ed, float parts
// added; if both kinds are present the bool part becomes -inf in the float mask. The causal limit
// is left out when the caller applies it itself (the fused kernel skips those tiles).
// With a self-attention KVCache the L queries are the last L of the S positions: query q is at
// position q + causal_offset.
MergedMask merge_masks(const MhaOptions& o, const AttnSizes& n, DType dt, bool batched,
                       bool include_causal, int64_t causal_offset) {
  const auto [B, H, L, S] = n;
  Tensor ignore, additive;
  auto add_part = [&](const Tensor& m) {
    if (m.dtype() == kBool) {
      ignore = ignore.defined() ? logical_or(ignore, m) : m;
    } else {
      additive = additive.defined() ? add(additive, m) : m;
    }
  };
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    check_mask_dtype("key_padding_mask", m, dt);
    const Shape expected = batched ? Shape{B, S} : Shape{S};
    if (m.shape() != expected)
      throw ShapeError(fmt::format("{}: key_padding_mask must be {} (batch, key length), got {}",
                                   kOp, shape_str(expected), shape_str(m.shape())));
    add_part(m.reshape({B, 1, 1, S}));
  }
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    check_mask_dtype("attn_mask", m, dt);
    if (m.shape() == Shape{L, S}) {
      add_part(m);
    } else if (m.shape() == Shape{B * H, L, S}) {
      add_part(m.reshape({B, H, L, S}));
    } else {
      throw ShapeError(fmt::format("{}: attn_mask must be {} or {} (batch * heads, L, S), got {}",
                                   kOp, shape_str({L, S}), shape_str({B * H, L, S}),
                                   shape_str(m.shape())));
    }
  }
  if (o.is_causal && include_causal) {  // key k is hidden from query q when k > q + offset
    const auto first = static_cast<double>(causal_offset);
    add_part(
        gt(arange(S).view({1, S}), arange(first, first + static_cast<double>(L)).view({L, 1})));
  }
  if (o.valid_lens.defined()) {
    Tensor lens = batched ? o.valid_lens : o.valid_lens.unsqueeze(0);
    if (lens.dtype() != kInt64)
      throw DTypeError(fmt::format("{}: valid_lens must be int64, got {} {}", kOp,
                                   dtype_name(lens.dtype()), shape_str(o.valid_lens.shape())));
    const bool per_query = lens.shape() == Shape{B, L};
    if (lens.shape() != Shape{B} && !per_query)
      throw ShapeError(fmt::format("{}: valid_lens must be {} or {} (batch, query length), got {}",
                                   kOp, shape_str({B}), shape_str({B, L}),
                                   shape_str(o.valid_lens.shape())));
    for (int64_t len : lens.to_vector<int64_t>())
      if (len < 0)
        throw ValueError(fmt::format("{}: valid_lens has a negative length {}", kOp, len));
    add_part(ge(arange(S).view({1, 1, 1, S}), lens.reshape({B, 1, per_query ? L : 1, 1})));
  }
  if (!additive.defined()) {
    if (!ignore.defined()) return {};
    return {logical_not(ignore), MaskKind::Bool};
  }
  if (ignore.defined())
    additive = add(additive, masked_fill(zeros(ignore.shape(), dt), ignore, kNegInf<double>));
  return {additive, MaskKind::Additive};
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout,
                                       bool bias, int64_t kdim, int64_t vdim, bool batch_first)
    : Module(kOp),
      embed_dim_(embed_dim),
      num_heads_(num_heads),
      head_dim_(num_heads > 0 ? embed_dim / num_heads : 0),
      kdim_(kdim == 0 ? embed_dim : kdim),
      vdim_(vdim == 0 ? embed_dim : vdim),
      dropout_(dropout),
      batch_first_(batch_first),
      gen_(&default_generator()) {
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
    throw ValueError(
        fmt::format("{}: embed_dim ({}) must be positive and divisible by num_heads ({})", kOp,
                    embed_dim, num_heads));
  if (kdim < 0 || vdim < 0)
    throw ValueError(fmt::format("{}: kdim ({}) and vdim ({}) must be >= 0", kOp, kdim, vdim));
  if (dropout < 0 || dropout > 1)
    throw ValueError(fmt::format("{}: dropout must be in [0, 1], got {}", kOp, dropout));
  const int64_t E = embed_dim;
  if (kdim_ == E && vdim_ == E) {
    in_proj_weight_ = register_parameter("in_proj_weight", empty({3 * E, E}));
  } else {
    q_proj_weight_ = register_parameter("q_proj_weight", empty({E, E}));
    k_proj_weight_ = register_parameter("k_proj_weight", empty({E, kdim_}));
    v_proj_weight_ = register_parameter("v_proj_weight", empty({E, vdim_}));
  }
  if (bias) in_proj_bias_ = register_parameter("in_proj_bias", empty({3 * E}));
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(E, E, bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters(Generator& gen) {
  if (packed()) {
    init::xavier_uniform_(in_proj_weight_, 1.0, gen);
  } else {
    for (const Tensor& w : {q_proj_weight_, k_proj_weight_, v_proj_weight_})
      init::xavier_uniform_(w, 1.0, gen);
  }
  out_proj_->reset_parameters(gen);
  if (in_proj_bias_.defined()) init::zeros_(in_proj_bias_);
  if (out_proj_->bias().defined()) init::zeros_(out_proj_->bias());
}

void MultiheadAttention::check_inputs(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const MhaOptions& o, bool reuse_kv) const {
  const bool kv_ok = reuse_kv || (key.defined() && value.defined() && key.dim() == query.dim() &&
                                  value.dim() == query.dim());
  if (!query.defined() || (query.dim() != 2 && query.dim() != 3) || !kv_ok)
    throw ShapeError(
        fmt::format("{}: query, key and value must all be 3-D (batched) or all 2-D, got {}, {}, {}",
                    kOp, query.defined() ? shape_str(query.shape()) : "undefined",
                    key.defined() ? shape_str(key.shape()) : "undefined",
                    value.defined() ? shape_str(value.shape()) : "undefined"));
  const DType dt = out_proj_->weight().dtype();
  if (query.dtype() != dt || (!reuse_kv && (key.dtype() != dt || value.dtype() != dt)))
    throw DTypeError(
        fmt::format("{}: query, key and value must have the parameters' dtype {}, "
                    "got {}, {}, {}",
                    kOp, dtype_name(dt), dtype_name(query.dtype()),
                    reuse_kv ? "(cached)" : dtype_name(key.dtype()),
                    reuse_kv ? "(cached)" : dtype_name(value.dtype())));
  const KVCache* cache = o.kv_cache;
  if (!cache) return;
  if (cache->is_static()) {
    if (o.is_causal)
      throw ValueError(fmt::format(
          "{}: is_causal with a static (cross-attention) KVCache is not supported", kOp));
    return;
  }
  if (!query.same(key) || !key.same(value))
    throw ValueError(fmt::format(
        "{}: a self-attention KVCache needs query, key and value to be one tensor (the new "
        "positions), got {}, {}, {}",
        kOp, shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape())));
  if (!o.is_causal || o.attn_mask.defined())
    throw ValueError(fmt::format(
        "{}: a self-attention KVCache holds only earlier positions, so the attention must be "
        "causal: set is_causal and no attn_mask (got is_causal = {}, attn_mask {})",
        kOp, o.is_causal, o.attn_mask.defined() ? shape_str(o.attn_mask.shape()) : "undefined"));
}

MhaOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const MhaOptions& o) const {
  // I: the width of the projections, E until heads are pruned.
  const int64_t E = embed_dim_, H = num_heads_, d = head_dim_, I = H * d;
  KVCache* cache = o.kv_cache;
  // A filled static cache stands in for key and value: they are not read.
  const bool reuse_kv = cache && cache->is_static() && !cache->empty();
  check_inputs(query, key, value, o, reuse_kv);
  const bool batched = query.dim() == 3;
  const DType dt = out_proj_->weight().dtype();
  // Unbatched input gets a batch dim of 1 where the layout keeps it.
  const int64_t bdim = batch_first_ ? 0 : 1, sdim = 1 - bdim;
  const Tensor q = batched ? query : query.unsqueeze(bdim);
  const Tensor k = reuse_kv ? Tensor() : batched ? key : key.unsqueeze(bdim);
  const Tensor v = reuse_kv ? Tensor() : batched ? value : value.unsqueeze(bdim);
  const int64_t B = q.size(bdim), L = q.size(sdim);
  if (q.size(2) != E ||
      (!reuse_kv && (k.size(2) != kdim_ || v.size(2) != vdim_ || k.size(bdim) != B ||
                     v.size(bdim) != B || v.size(sdim) != k.size(sdim))))
    throw ShapeError(fmt::format(
        "{}: expected query (.., {}), key (.., {}) and value (.., {}) with one batch size and "
        "key/value of one length ({}), got query {}, key {}, value {}",
        kOp, E, kdim_, vdim_, batch_first_ ? "batch_first" : "seq-first", shape_str(query.shape()),
        reuse_kv ? "(cached)" : shape_str(key.shape()),
        reuse_kv ? "(cached)" : shape_str(value.shape())));

  // Input projections in the input's own layout (row-wise, so no transpose copy is needed).
  auto rows = [](const Tensor& t, int64_t block, int64_t count, int64_t size) {
    return t.defined() ? t.narrow(0, block * size, count * size) : Tensor();
  };
  Tensor qp, kp, vp;  // (.., I) each
  const Tensor& b = in_proj_bias_;
  // Blocks [first, first + count) of the projections (0 q, 1 k, 2 v) side by side.
  auto project = [&](const Tensor& x, int64_t first, int64_t count) {
    if (quantized_in_proj_) return quantized_in_proj_->forward_for(*this, x, first, count);
    if (packed() && count == 3) {
      if (Tensor y = in_proj_prepacked_.try_forward(x, in_proj_weight_, b); y.defined()) return y;
      return linear(x, in_proj_weight_, b);
    }
    if (packed())
      return linear(x, rows(in_proj_weight_, first, count, I), rows(b, first, count, I));
    const Tensor& w = first == 0 ? q_proj_weight_ : first == 1 ? k_proj_weight_ : v_proj_weight_;
    return linear(x, w, rows(b, first, 1, I));
  };
  if (reuse_kv) {
    qp = project(q, 0, 1);
  } else if (packed() && query.same(key) && key.same(value)) {  // self-attention: one GEMM
    Tensor p = project(q, 0, 3);
    qp = p.narrow(2, 0, I), kp = p.narrow(2, I, I), vp = p.narrow(2, 2 * I, I);
  } else if (packed() && key.same(value)) {
    qp = project(q, 0, 1);
    Tensor p = project(k, 1, 2);
    kp = p.narrow(2, 0, I), vp = p.narrow(2, I, I);
  } else {
    qp = project(q, 0, 1), kp = project(k, 1, 1), vp = project(v, 2, 1);
  }
  // (B, len, I) or (len, B, I) -> (B, H, len, d): a view.
  auto heads = [&](const Tensor& t) {
    Tensor u = t.unflatten(2, {H, d});
    return batch_first_ ? u.permute({0, 2, 1, 3}) : u.permute({1, 2, 0, 3});
  };
  Tensor qh = heads(qp), kh, vh;
  if (reuse_kv) {
    kh = cache->keys(), vh = cache->values();
    if (kh.size(0) != B)
      throw ShapeError(fmt::format("{}: query batch {} but the static KVCache holds a batch of {}",
                                   kOp, B, kh.size(0)));
  } else {
    kh = heads(kp), vh = heads(vp);
    if (cache && cache->is_static()) cache->store(kh, vh);
    if (cache && !cache->is_static()) std::tie(kh, vh) = cache->append(kh, vh);
  }
  const int64_t S = kh.size(2);
  const int64_t causal_offset = cache && !cache->is_static() ? S - L : 0;

  // Without need_weights the fused kernel runs, and the (B, H, L, S) weights never exist. In
  // inference on short sequences, materialising them is faster (encoder_infer 6.9 -> 6.6 ms);
  // in training it saved no time and kept the weights (vit_small 159 -> 260 MB), so it does not.
  const bool small_inference =
      !GradMode::enabled() && L * S <= machine::profile().attention_materialize_max_scores;
  const bool fused = !o.need_weights && (o.path == AttentionPath::Fused ||
                                         (o.path == AttentionPath::Auto && !small_inference));
  // The fused kernel applies an unshifted causal limit itself; a single cached query sees every
  // key, so it needs none.
  const bool causal_in_kernel = fused && causal_offset == 0;
  const bool causal_in_mask = !causal_in_kernel && !(causal_offset > 0 && L == 1);
  const MergedMask mask = merge_masks(o, {B, H, L, S}, dt, batched, causal_in_mask, causal_offset);

  Tensor attn, ctx;  // (B, H, L, S), (B, H, L, d)
  if (fused) {
    ctx = scaled_dot_product_attention(qh, kh, vh,
                                       {.attn_mask = mask.mask,
                                        .dropout_p = is_training() ? dropout_ : 0.0,
                                        .is_causal = o.is_causal && causal_in_kernel,
                                        .generator = gen_});
  } else {
    Tensor scores = matmul(mul(qh, 1.0 / std::sqrt(static_cast<double>(d))), kh.mT());
    attn = mask.mask.defined() ? masked_softmax(scores, mask.mask, mask.kind) : softmax(scores, -1);
    attn = dropout(attn, dropout_, is_training(), *gen_);
    ctx = matmul(attn, vh);
  }
  ctx = batch_first_ ? ctx.permute({0, 2, 1, 3}).reshape({B, L, I})
                     : ctx.permute({2, 0, 1, 3}).reshape({L, B, I});
  MhaOutput out{(*out_proj_)(ctx), Tensor()};
  if (o.need_weights) out.weights = o.average_attn_weights ? mean(attn, {1}) : attn;
  if (!batched) {
    out.output = out.output.squeeze(bdim);
    if (out.weights.defined()) out.weights = out.weights.squeeze(0);
  }
  return out;
}

void MultiheadAttention::prune_heads(const std::vector<int64_t>& heads) {
  const int64_t H = num_heads_, d = head_dim_, I = H * d;
  std::vector<bool> drop(static_cast<size_t>(H), false);
  for (int64_t h : heads) {
    if (h < 0 || h >= H)
      throw IndexError(
          fmt::format("{}.prune_heads: head {} is out of range for {} heads", kOp, h, H));
    drop[static_cast<size_t>(h)] = true;
  }
  std::vector<int64_t> kept;  // the projection rows (within one block of I) that stay
  for (int64_t h = 0; h < H; ++h)
    if (!drop[static_cast<size_t>(h)])
      for (int64_t j = 0; j < d; ++j) kept.push_back(h * d + j);
  const auto rows_left = static_cast<int64_t>(kept.size());
  if (rows_left == 0)
    throw ValueError(
        fmt::format("{}.prune_heads: pruning all {} heads; at least one must remain", kOp, H));
  if (rows_left == I) return;
  // The rows of `blocks` stacked blocks of I (Q, K, V) that belong to kept heads.
  auto block_index = [&](int64_t blocks) {
    std::vector<int64_t> idx;
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t r : kept) idx.push_back(b * I + r);
    return from_vector(idx, {static_cast<int64_t>(idx.size())});
  };
  NoGradGuard no_grad;
  auto shrink = [](Tensor t, int64_t dim, const Tensor& idx) {
    if (t.defined()) set_data_(t, index_select(t.detach(), dim, idx).contiguous());
  };
  if (packed()) {
    shrink(in_proj_weight_, 0, block_index(3));
  } else {
    for (Tensor* w : {&q_proj_weight_, &k_proj_weight_, &v_proj_weight_})
      shrink(*w, 0, block_index(1));
  }
  shrink(in_proj_bias_, 0, block_index(3));
  shrink(out_proj_->weight(), 1, block_index(1));
  num_heads_ = rows_left / d;
}

}  // namespace nabla::nn
