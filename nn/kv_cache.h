// Key/value caches for incremental (token by token) decoding with MultiheadAttention, as in
// fairseq's incremental_state and Hugging Face's past_key_values: generating position t then
// projects only the new position and attends over the t cached keys, O(t) work instead of
// recomputing the whole prefix, O(t^2).
//
// A self-attention KVCache holds the projected keys and values, per head, of every position
// decoded so far, in buffers of max_len positions allocated on the first step; each step writes
// its keys/values into the next slots (no reallocation) and attends over a view of the filled
// part. A static KVCache (cross-attention) stores the projected keys/values of the encoder
// memory on its first use and reuses them on every later step.
//
// The caches are for inference: appending refuses tensors that require grad (use NoGradGuard).
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::nn {

class KVCache {
 public:
  // Self-attention: every forward appends its positions, at most max_len in all.
  explicit KVCache(int64_t max_len);
  // Cross-attention: the first forward stores the keys/values of its key/value inputs; later
  // forwards reuse them (and do not read key/value).
  static KVCache static_kv();

  bool is_static() const { return static_; }
  bool empty() const { return length_ == 0; }
  int64_t length() const { return length_; }    // positions held
  int64_t max_len() const { return max_len_; }  // self-attention only; static: its length
  int64_t batch_size() const { return k_.defined() ? k_.size(0) : 0; }

  // Self-attention: writes k, v (B, H, l, d) after the cached positions and returns views of
  // all cached keys and values (B, H, length, d).
  std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v);
  // Static: stores k, v (B, H, S, d) once.
  void store(const Tensor& k, const Tensor& v);
  // The cached keys and values (B, H, length, d), views.
  Tensor keys() const;
  Tensor values() const;

  // Beam search: row i of the batch becomes old row batch_index[i] (int64, 1-D, any length, so a
  // batch of 1 can fan out into beams).
  void reorder(const Tensor& batch_index);
  // Back to empty (a self-attention cache keeps its buffers for the next sequence).
  void reset();

 private:
  KVCache(int64_t max_len, bool is_static) : max_len_(max_len), static_(is_static) {}

  Tensor k_, v_;  // self: (B, H, max_len, d) buffers; static: (B, H, S, d)
  int64_t max_len_ = 0, length_ = 0;
  bool static_ = false;
};

// The caches of a Transformer stack, one per layer: self-attention caches (appended each step)
// and, for a decoder, the static cross-attention caches of the memory (filled on the first step).
// TransformerEncoder / TransformerDecoder size the vectors on first use.
struct TransformerCache {
  explicit TransformerCache(int64_t max_positions) : max_len(max_positions) {}

  int64_t max_len;
  std::vector<KVCache> self_attn, cross_attn;

  // Positions decoded so far (the offset of the next step's first position).
  int64_t length() const { return self_attn.empty() ? 0 : self_attn.front().length(); }
  // Every layer's caches, self and cross (see KVCache::reorder).
  void reorder(const Tensor& batch_index);
  // Empty again: a new sequence, possibly with a new memory.
  void reset();
  // Makes `layers` self-attention (and, with cross, static cross-attention) caches on first
  // use; afterwards checks the count matches. `who` names the caller in the error.
  void prepare(size_t layers, bool cross, const char* who);
};

}  // namespace nabla::nn
