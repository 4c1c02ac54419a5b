// char_gpt's model: a decoder-only Transformer language model over characters, GPT-2's design
// (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"; the layout of
// Karpathy's nanoGPT) built from nabla's PyTorch-compatible pieces:
//
//   tokens (B, T) -> wte(tokens) + wpe(0..T-1) -> drop
//                 -> h: `layers` x TransformerEncoderLayer (causal, pre-norm, GELU, batch-first)
//                 -> ln_f -> linear(., wte.weight)   (tied input/output embedding, Press & Wolf
//                 2017)
//                 -> logits (B, T, vocab)
//
// Parameter names (state_dict) are those of the PyTorch twin (tests/fixtures/gen_char_gpt.py,
// bench/py/gpt.py): wte.weight, wpe.weight, h.layers.{i}.{self_attn,linear1,linear2,norm1,
// norm2}.*, ln_f.{weight,bias}. The output projection has no parameter of its own: its gradient
// accumulates into wte.weight.
#pragma once
#include <cstdint>
#include <memory>

#include "nabla/nabla.h"

namespace char_gpt {

struct ModelConfig {
  int64_t vocab = 0;      // distinct characters
  int64_t context = 256;  // positions (learned position embedding)
  int64_t d_model = 256, heads = 8, layers = 4, ffn = 1024;
  double dropout = 0.1;
};

class Model : public nabla::nn::Module {
 public:
  explicit Model(const ModelConfig& config);
  const ModelConfig& config() const { return config_; }

  // tokens (B, T) int64, 1 <= T <= context, ids in [0, vocab) -> logits (B, T, vocab).
  nabla::Tensor forward(const nabla::Tensor& tokens);
  // Incremental decoding: tokens (B, t) follow the cache.length() positions already in `cache`
  // (made with max length >= context) -> (B, t, vocab). Run under NoGradGuard.
  nabla::Tensor forward(const nabla::Tensor& tokens, nabla::nn::TransformerCache& cache);

  // The pieces of forward: the final hidden states (B, t, d_model) after ln_f (cache may be
  // null), and their logits. Generation projects only the last position.
  nabla::Tensor hidden(const nabla::Tensor& tokens, nabla::nn::TransformerCache* cache);
  nabla::Tensor project(const nabla::Tensor& hidden) const;

  const std::shared_ptr<nabla::nn::Embedding>& token_embedding() const { return wte_; }

 private:
  ModelConfig config_;
  std::shared_ptr<nabla::nn::Embedding> wte_, wpe_;
  std::shared_ptr<nabla::nn::Dropout> drop_;
  std::shared_ptr<nabla::nn::TransformerEncoder> h_;
  std::shared_ptr<nabla::nn::LayerNorm> ln_f_;
};

// The model as a NextToken over its own KV cache (nn::CachedNextToken): the prompt costs one
// forward, every later token one position, O(t) per step instead of O(t^2). The decoders
// (greedy, sample, beam_search) reset, feed and reorder it. Feeding more than `context`
// positions in all is an error naming the counts (slide a window and reset() to go on).
class CachedGenerator final : public nabla::nn::NextToken {
 public:
  explicit CachedGenerator(Model& model);
  int64_t vocab_size() const override { return next_.vocab_size(); }
  nabla::Tensor logits(const nabla::Tensor& new_tokens) override;
  void reorder(const nabla::Tensor& batch_index) override { next_.reorder(batch_index); }
  void reset() override { next_.reset(); }
  const nabla::nn::TransformerCache& cache() const { return next_.cache(); }

 private:
  nabla::nn::CachedNextToken next_;
};

}  // namespace char_gpt
