// A small transformer-encoder classifier and its training step, for the reliability tests: the
// growth test (500 steps), the deterministic-mode test (1 vs 2 threads) and the soak program
// (tests/soak_train.cpp). Every batch is made from (seed, step) alone, so two runs with one seed
// see the same data. The task: label = (sum of the tokens) mod classes.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nabla/nabla.h"

namespace nabla::test {

struct SmallEncoderOptions {
  int64_t vocab = 32, d_model = 32, heads = 4, ffn = 64, layers = 2, classes = 4, batch = 8;
  std::vector<int64_t> lengths = {8, 12, 16};  // batch s has lengths[s % size] tokens
  double dropout = 0.1;
  uint64_t seed = 1;
};

class SmallEncoderModel : public nn::Module {
 public:
  explicit SmallEncoderModel(const SmallEncoderOptions& o) : nn::Module("SmallEncoderModel") {
    embedding_ = register_module("embedding", std::make_shared<nn::Embedding>(o.vocab, o.d_model));
    nn::TransformerEncoderLayerOptions layer;
    layer.d_model = o.d_model;
    layer.nhead = o.heads;
    layer.dim_feedforward = o.ffn;
    layer.dropout = o.dropout;
    layer.batch_first = true;
    encoder_ =
        register_module("encoder", std::make_shared<nn::TransformerEncoder>(layer, o.layers, true));
    head_ = register_module("head", std::make_shared<nn::Linear>(o.d_model, o.classes));
  }
  // tokens (B, T) int64 -> logits (B, classes)
  Tensor forward(const Tensor& tokens) const {
    Tensor x = encoder_->forward(embedding_->forward(tokens));
    return head_->forward(mean(x, {1}));
  }

 private:
  std::shared_ptr<nn::Embedding> embedding_;
  std::shared_ptr<nn::TransformerEncoder> encoder_;
  std::shared_ptr<nn::Linear> head_;
};

class SmallEncoderTrainer {
 public:
  explicit SmallEncoderTrainer(SmallEncoderOptions o) : o_(std::move(o)) {
    manual_seed(o_.seed);  // initial weights and dropout masks
    model_ = std::make_shared<SmallEncoderModel>(o_);
    optimizer_ =
        std::make_unique<optim::AdamW>(model_->parameters(), optim::AdamWOptions{.lr = 3e-3});
  }

  // One step on batch `s`: forward, loss, zero_grad, backward, clip, AdamW step. Returns the
  // loss. The graph is gone when it returns; the gradients stay until the next step.
  double step(int64_t s) {
    const auto [tokens, labels] = batch(s);
    Tensor loss = cross_entropy(model_->forward(tokens), labels);
    optimizer_->zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model_->parameters(), 1.0);
    optimizer_->step();
    return loss.item();
  }

  std::pair<Tensor, Tensor> batch(int64_t s) const {
    Generator g(o_.seed * 1000003 + static_cast<uint64_t>(s));
    const int64_t len = o_.lengths[static_cast<size_t>(s) % o_.lengths.size()];
    Tensor tokens = randint(0, o_.vocab, {o_.batch, len}, g);
    const std::vector<int64_t> t = tokens.to_vector<int64_t>();
    std::vector<int64_t> labels(static_cast<size_t>(o_.batch), 0);
    for (size_t i = 0; i < t.size(); ++i) labels[i / static_cast<size_t>(len)] += t[i];
    for (int64_t& l : labels) l %= o_.classes;
    return {tokens, from_vector(labels, {o_.batch})};
  }

  SmallEncoderModel& model() { return *model_; }

 private:
  SmallEncoderOptions o_;
  std::shared_ptr<SmallEncoderModel> model_;
  std::unique_ptr<optim::AdamW> optimizer_;
};

}  // namespace nabla::test
