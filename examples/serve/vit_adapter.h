// vit_fashion_mnist's ViT behind the server (--model vit): 28x28 grayscale images in [0, 1],
// normalised as in training; the same batcher as langid (every image has the same length).
#pragma once
#include <memory>

#include "examples/serve/model_adapter.h"
#include "nabla/nn/vit.h"

namespace nabla::serve {

class VitAdapter : public ModelAdapter {
 public:
  static constexpr int64_t kSide = 28;
  // The width, depth, patch size and classes come from the checkpoint's tensor shapes; heads from
  // model.json beside it when present (written by vit_fashion_mnist), else `heads`.
  VitAdapter(const std::string& checkpoint, int64_t heads);
  const std::vector<std::string>& labels() const override { return labels_; }
  int64_t length(const Input&) const override { return 1; }
  std::vector<Prediction> predict(const std::vector<const Input*>& batch) override;
  std::string describe() const override;

 private:
  std::vector<std::string> labels_;
  std::unique_ptr<nn::ViT> model_;
};

}  // namespace nabla::serve
