// Positional encodings added to a (B, T, d) sequence of embeddings, then dropout: the fixed
// sinusoidal table of "Attention Is All You Need" / d2l, and a learned table.
#pragma once
#include <cstdint>
#include <memory>

#include "nabla/nn/layers.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

// The sinusoidal table (max_len, d): P[pos, 2i] = sin(pos / 10000^(2i/d)),
// P[pos, 2i+1] = cos(pos / 10000^(2i/d)). Computed in double, returned in dt.
Tensor sinusoidal_table(int64_t max_len, int64_t d, DType dt = kFloat32);

// Both encodings take (d_model, dropout, max_len), the order of PyTorch's tutorial module.

// X + P[:T] then dropout. P is a non-persistent buffer "P" of shape (1, max_len, d), so it is not
// in state_dict() (d2l's PositionalEncoding).
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(int64_t d_model, double dropout, int64_t max_len = 1000);
  // x (B, T, d_model) with T <= max_len -> (B, T, d_model).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&PositionalEncoding::forward, x); }
  const Tensor& table() const { return P_; }  // (1, max_len, d_model)
  const std::shared_ptr<Dropout>& dropout() const { return dropout_; }

 private:
  int64_t d_model_, max_len_;
  Tensor P_;
  std::shared_ptr<Dropout> dropout_;
};

// X + W[:T] then dropout, with a learned parameter "weight" (1, max_len, d) initialised
// trunc_normal(std 0.02) like ViT's and BERT's position embeddings.
class LearnedPositionalEncoding : public Module {
 public:
  LearnedPositionalEncoding(int64_t d_model, double dropout, int64_t max_len);
  // x (B, T, d_model) with T <= max_len -> (B, T, d_model).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&LearnedPositionalEncoding::forward, x); }
  const Tensor& weight() const { return weight_; }
  const std::shared_ptr<Dropout>& dropout() const { return dropout_; }

 private:
  int64_t d_model_, max_len_;
  Tensor weight_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace nabla::nn
