// The encoder benchmarks' model (bench/encoder.cpp, bench/int8.cpp), the same as
// bench/py/encoder.py's: tokens (B, T) -> Embedding(vocab, d) + sinusoidal positions (dropout)
// -> L post-norm TransformerEncoderLayer (batch_first, ReLU) -> mean over the sequence ->
// Linear(d, 10). small: B 32, T 64, d 128, 4 heads, FFN 512, 2 layers; large: B 16, T 256,
// d 256, 8 heads, FFN 1024, 4 layers.
#pragma once
#include <memory>
#include <string>

#include "nabla/nabla.h"

namespace nabla::bench {

struct Config {
  int64_t batch, seq, d_model, heads, ffn, layers;
  int64_t vocab = 1000, classes = 10;
  double dropout = 0.1;
};

inline Config config_named(const std::string& name) {
  if (name == "small")
    return {.batch = 32, .seq = 64, .d_model = 128, .heads = 4, .ffn = 512, .layers = 2};
  return {.batch = 16, .seq = 256, .d_model = 256, .heads = 8, .ffn = 1024, .layers = 4};
}

class EncoderClassifier : public nn::Module {
 public:
  explicit EncoderClassifier(const Config& c) : Module("EncoderClassifier") {
    embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(c.vocab, c.d_model));
    pos_ = register_module("pos_encoding",
                           std::make_shared<nn::PositionalEncoding>(c.d_model, c.dropout, c.seq));
    nn::TransformerEncoderLayerOptions layer;
    layer.d_model = c.d_model;
    layer.nhead = c.heads;
    layer.dim_feedforward = c.ffn;
    layer.dropout = c.dropout;
    layer.activation = nn::FFNActivation::ReLU;
    layer.batch_first = true;
    layer.norm_first = false;  // post-norm, PyTorch's default
    encoder_ =
        register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, c.layers));
    head_ = register_module("head", std::make_shared<nn::Linear>(c.d_model, c.classes));
  }

  // tokens int64 (B, T) -> logits (B, classes)
  Tensor forward(const Tensor& tokens) const {
    Tensor x = pos_->forward(embedding_->forward(tokens));  // (B, T, d)
    x = encoder_->forward(x);                               // (B, T, d)
    return head_->forward(mean(x, {1}));                    // (B, classes)
  }

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::PositionalEncoding> pos_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

}  // namespace nabla::bench
