// nn::MultiheadAttention: PyTorch's nn.MultiheadAttention (same parameter names, layout, init and
// mask semantics) plus d2l-style valid_lens masking. Every head runs as one batched matmul over a
// (B, H, L, d) view of the projections; all masks are merged into one masked_softmax call.
//
// d2l 10.5 writes multi-head attention with four Linear layers W_q, W_k, W_v, W_o (E -> E).
// Here they are the three row blocks of in_proj_weight (3E, E) and out_proj:
//   W_q.weight = in_proj_weight[0:E],  W_k.weight = in_proj_weight[E:2E],
//   W_v.weight = in_proj_weight[2E:3E], W_o = out_proj   (biases: in_proj_bias likewise).
// With kdim/vdim != E they are the separate q_proj_weight (E, E), k_proj_weight (E, kdim) and
// v_proj_weight (E, vdim).
#pragma once
#include <cstdint>
#include <memory>

#include "nabla/core/generator.h"
#include "nabla/nn/kv_cache.h"
#include "nabla/nn/linear.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

class QuantizedInProjection;  // nn/quantized.h

// Masks and switches of one MultiheadAttention::forward call. B batch, L query length, S key
// length, H heads. Bool masks: true = this position may NOT be attended (PyTorch's convention);
// float masks are added to the attention logits (-inf masks a position). A query row whose keys
// are all masked gets all-zero weights (PyTorch gives NaN there) and zero gradients.
// How the weights are computed when need_weights is false. Auto: the fused flash-style kernel
// (memory linear in the length), except without grad mode when the weights are small
// (L * S at most the machine profile's attention_materialize_max_scores, core/machine.h): there
// materialising them is faster and nothing is kept. The results are the same either way.
enum class AttentionPath { Auto, Fused, Materialized };

struct MhaOptions {
  Tensor key_padding_mask{};  // (B, S) (or (S) unbatched): bool, or float additive
  Tensor attn_mask{};         // (L, S) or (B*H, L, S): bool, or float additive
  bool is_causal = false;     // also mask every key after the query (k > q)
  bool need_weights = true;
  bool average_attn_weights = true;  // weights (B, L, S) averaged over heads, else (B, H, L, S)
  Tensor valid_lens{};               // int64 (B,) or (B, L): keys k >= valid_len are masked (d2l)
  AttentionPath path = AttentionPath::Auto;  // ignored when need_weights (weights materialised)
  // Incremental decoding (nn/kv_cache.h). A self-attention cache: query, key and value are the
  // same tensor of new positions, is_causal must be set and attn_mask undefined; their keys and
  // values are appended and the queries attend over every cached position (a key_padding_mask
  // then covers all of them). A static cache: the first call stores the projected key/value,
  // later calls use those and do not read key/value (pass undefined tensors).
  KVCache* kv_cache = nullptr;
};

struct MhaOutput {
  Tensor output;   // (B, L, E) batch_first, else (L, B, E); (L, E) for unbatched input
  Tensor weights;  // see MhaOptions::average_attn_weights; undefined unless need_weights
};
inline std::vector<Tensor*> module_outputs(MhaOutput& o) { return {&o.output, &o.weights}; }

class MultiheadAttention : public Module {
 public:
  // kdim / vdim = 0 means embed_dim. dropout applies to the attention weights in training mode.
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     int64_t kdim = 0, int64_t vdim = 0, bool batch_first = false);

  // query (L, B, E) / key (S, B, kdim) / value (S, B, vdim), or (B, L, E) ... when batch_first,
  // or unbatched (L, E) / (S, kdim) / (S, vdim).
  MhaOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                    const MhaOptions& options = {}) const;
  MhaOutput operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                       const MhaOptions& options = {}) const {
    return call(&MultiheadAttention::forward, query, key, value, options);
  }

  // PyTorch's init: xavier_uniform_ on the input projections, zero biases; out_proj.weight keeps
  // Linear's default.
  void reset_parameters(Generator& gen = default_generator());
  // The generator for the attention-weight dropout masks (default_generator() unless set).
  void set_generator(Generator& gen) { gen_ = &gen; }

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return head_dim_; }

  // Removes the given heads (indices into the current heads) from the Q/K/V rows and the
  // out_proj columns, so the module computes exactly what it computed with those heads' outputs
  // gated to zero, with num_heads() - heads.size() heads (Michel et al. 2019, "Are Sixteen Heads
  // Really Better than One?"). At least one head must remain. Parameters keep their handles
  // (resized in place), so an optimizer made afterwards sees the new shapes.
  void prune_heads(const std::vector<int64_t>& heads);
  bool batch_first() const { return batch_first_; }
  // True when kdim == vdim == embed_dim: one packed in_proj_weight (3E, E).
  bool packed() const { return in_proj_weight_.defined(); }
  const Tensor& in_proj_weight() const { return in_proj_weight_; }  // undefined unless packed
  const Tensor& in_proj_bias() const { return in_proj_bias_; }      // undefined without bias
  const Tensor& q_proj_weight() const { return q_proj_weight_; }    // undefined when packed
  const Tensor& k_proj_weight() const { return k_proj_weight_; }
  const Tensor& v_proj_weight() const { return v_proj_weight_; }
  const std::shared_ptr<Linear>& out_proj() const { return out_proj_; }
  // Inference through int8 copies of the input projections (nn/quantized.h: quantize_dynamic);
  // null: float.
  void set_quantized_in_proj(std::shared_ptr<const QuantizedInProjection> q) {
    quantized_in_proj_ = std::move(q);
  }
  const std::shared_ptr<const QuantizedInProjection>& quantized_in_proj() const {
    return quantized_in_proj_;
  }
  // Self-attention's one input projection in inference, on in_proj_weight packed once
  // (ops/linear_prepacked.h).
  const PrepackedLinear& in_proj_prepacked() const { return in_proj_prepacked_; }

 private:
  void check_inputs(const Tensor& query, const Tensor& key, const Tensor& value,
                    const MhaOptions& o, bool reuse_kv) const;

  int64_t embed_dim_, num_heads_, head_dim_, kdim_, vdim_;  // heads * head_dim <= embed_dim
  double dropout_;
  bool batch_first_;
  Tensor in_proj_weight_, q_proj_weight_, k_proj_weight_, v_proj_weight_, in_proj_bias_;
  std::shared_ptr<Linear> out_proj_;
  std::shared_ptr<const QuantizedInProjection> quantized_in_proj_;
  PrepackedLinear in_proj_prepacked_;
  Generator* gen_;
};

}  // namespace nabla::nn
