// The two models of cnn_fashion_mnist.
//
// SmallCNN: two convolution blocks, then a classifier (LeCun et al. 1998's pattern, with batch
// normalisation, Ioffe & Szegedy 2015):
//   (1, 28, 28) -> [Conv 3x3 (w) -> BatchNorm -> ReLU -> MaxPool 2] -> (w, 14, 14)
//               -> [Conv 3x3 (2w) -> BatchNorm -> ReLU -> MaxPool 2] -> (2w, 7, 7)
//               -> Flatten -> Dropout -> Linear (hidden) -> ReLU -> Dropout -> Linear (10)
//
// HybridViT: the same two convolution blocks as a stem, whose 7 x 7 feature map becomes 49
// tokens of width 2w for pre-norm Transformer blocks (convolution finds local features, attention
// relates them across the image: Xiao et al. 2021, "Early convolutions help transformers see
// better"; Dosovitskiy et al. 2020 call this the hybrid ViT):
//   stem -> (B, 49, 2w) + learned positions -> depth x TransformerEncoderLayer (pre-norm, GELU)
//        -> LayerNorm -> mean over the tokens -> Linear (10)
#pragma once
#include <cstdint>
#include <memory>

#include "nabla/nabla.h"

namespace nabla::examples {

struct CnnConfig {
  int64_t width = 32;    // channels of the first convolution; the second has 2 * width
  int64_t hidden = 128;  // SmallCNN's classifier width
  double dropout = 0.25;
  // HybridViT's blocks.
  int64_t depth = 2, heads = 4, mlp = 256;
};

// The two convolution blocks: (B, 1, 28, 28) -> (B, 2 * width, 7, 7).
std::shared_ptr<nn::Sequential> conv_stem(int64_t width);

class SmallCNN : public nn::Module {
 public:
  explicit SmallCNN(const CnnConfig& config);
  Tensor forward(const Tensor& images) const;  // (B, 1, 28, 28) -> logits (B, 10)
  Tensor operator()(const Tensor& images) const { return call(&SmallCNN::forward, images); }

 private:
  std::shared_ptr<nn::Sequential> features_, classifier_;
};

class HybridViT : public nn::Module {
 public:
  explicit HybridViT(const CnnConfig& config);
  Tensor forward(const Tensor& images) const;  // (B, 1, 28, 28) -> logits (B, 10)
  Tensor operator()(const Tensor& images) const { return call(&HybridViT::forward, images); }

 private:
  std::shared_ptr<nn::Sequential> stem_;
  Tensor pos_embed_;
  std::shared_ptr<nn::ModuleList> blocks_;
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Linear> head_;
};

}  // namespace nabla::examples
