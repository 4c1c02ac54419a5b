#include "examples/cnn_fashion_mnist/models.h"

namespace nabla::examples {

std::shared_ptr<nn::Sequential> conv_stem(int64_t width) {
  // No conv bias: the batch norm right after it subtracts the mean anyway.
  auto block = [](nn::Sequential& s, int64_t in, int64_t out) {
    s.push_back(
        std::make_shared<nn::Conv2d>(in, out, 3, nn::Conv2dOptions{.padding = 1, .bias = false}));
    s.push_back(std::make_shared<nn::BatchNorm2d>(out));
    s.push_back(std::make_shared<nn::ReLU>());
    s.push_back(std::make_shared<nn::MaxPool2d>(2));
  };
  auto stem = std::make_shared<nn::Sequential>();
  block(*stem, 1, width);
  block(*stem, width, 2 * width);
  return stem;
}

SmallCNN::SmallCNN(const CnnConfig& c) : Module("SmallCNN") {
  features_ = register_module("features", conv_stem(c.width));
  classifier_ = register_module(
      "classifier",
      std::make_shared<nn::Sequential>(
          std::make_shared<nn::Flatten>(), std::make_shared<nn::Dropout>(c.dropout),
          std::make_shared<nn::Linear>(2 * c.width * 7 * 7, c.hidden), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Dropout>(c.dropout), std::make_shared<nn::Linear>(c.hidden, 10)));
}

Tensor SmallCNN::forward(const Tensor& images) const {
  return (*classifier_)((*features_)(images));
}

HybridViT::HybridViT(const CnnConfig& c) : Module("HybridViT") {
  const int64_t dim = 2 * c.width;
  stem_ = register_module("stem", conv_stem(c.width));
  pos_embed_ = register_parameter("pos_embed", zeros({1, 49, dim}));
  nn::init::trunc_normal_(pos_embed_, 0.0, 0.02);
  blocks_ = register_module("blocks", std::make_shared<nn::ModuleList>());
  const nn::TransformerEncoderLayerOptions block{.d_model = dim,
                                                 .nhead = c.heads,
                                                 .dim_feedforward = c.mlp,
                                                 .dropout = 0.0,
                                                 .activation = nn::FFNActivation::GELU,
                                                 .batch_first = true,
                                                 .norm_first = true};
  for (int64_t i = 0; i < c.depth; ++i)
    blocks_->push_back(std::make_shared<nn::TransformerEncoderLayer>(block));
  norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(dim));
  head_ = register_module("head", std::make_shared<nn::Linear>(dim, 10));
}

Tensor HybridViT::forward(const Tensor& images) const {
  const Tensor map = (*stem_)(images);  // (B, dim, 7, 7)
  // (B, dim, 7, 7) -> (B, 49, dim): one token per position of the feature map.
  Tensor x = add(map.flatten(2).transpose(1, 2), pos_embed_);
  for (const auto& block : *blocks_)
    x = (*std::static_pointer_cast<nn::TransformerEncoderLayer>(block))(x);
  return (*head_)(mean((*norm_)(x), {1}));
}

}  // namespace nabla::examples
