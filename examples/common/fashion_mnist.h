// Fashion-MNIST for the image trainers (vit_fashion_mnist, cnn_fashion_mnist): Debian's
// dataset-fashion-mnist, thinned for --smoke and the limits, normalised, optionally augmented,
// evaluated into a confusion matrix, and one test image per class drawn.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "examples/common/training.h"
#include "nabla/data/idx.h"
#include "nabla/nn/module.h"

namespace nabla::examples {

inline constexpr double kFashionMean = 0.2860, kFashionStd = 0.3530;  // training-set pixels
const std::vector<std::string>& fashion_classes();                    // "T-shirt", "Trouser", ...

// Both splits and their normalised model inputs (N, 1, 28, 28).
struct FashionData {
  data::ImageDataset train, test;
  Tensor train_x, test_x;
};
// limit 0 = every image; otherwise every k-th image so that `limit` remain (all classes present).
FashionData load_fashion_mnist(int64_t train_limit, int64_t test_limit);

// A random horizontal flip per image and one random shift of up to 2 pixels per batch (pad with
// the background value, crop). It draws from the default generator, which checkpoints save, so a
// resumed run draws as an uninterrupted one would.
Tensor augment_fashion(const Tensor& images);

// Mean loss (cross-entropy with the training criterion's label smoothing) and the confusion
// matrix over the test split, 500 images at a time, in eval mode without a graph.
struct Evaluation {
  ConfusionMatrix confusion;
  double loss = 0;
};
Evaluation evaluate_fashion(nn::Module& model, const std::function<Tensor(const Tensor&)>& logits,
                            const FashionData& d, double label_smoothing);

// The first test image of each class, captioned (samples.png and .svg).
void save_fashion_samples(const FashionData& d, const std::string& path);

}  // namespace nabla::examples
