#include "examples/serve/vit_adapter.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "examples/common/fashion_mnist.h"
#include "nabla/nabla.h"

namespace nabla::serve {

namespace {

Shape shape_of(const io::NamedTensors& model, const std::string& name, const std::string& path) {
  for (const auto& [key, t] : model)
    if (key == name) return t.shape();
  throw FormatError(fmt::format(
      "nabla-serve: {} has no tensor model.{} (not a vit_fashion_mnist checkpoint?)", path, name));
}

}  // namespace

VitAdapter::VitAdapter(const std::string& checkpoint, int64_t heads)
    : labels_(examples::fashion_classes()) {
  const io::Checkpoint ck = io::Checkpoint::load(checkpoint);
  const io::NamedTensors& model = ck.section("model");
  nn::ViTConfig c;
  c.image_size = kSide;
  c.in_channels = 1;
  const Shape proj = shape_of(model, "patch_embed.proj.weight", checkpoint);
  c.dim = proj[0];
  c.patch_size = proj[2];
  c.mlp_dim = shape_of(model, "blocks.0.linear1.weight", checkpoint)[0];
  c.num_classes = shape_of(model, "head.weight", checkpoint)[0];
  std::set<std::string> blocks;
  for (const auto& [key, t] : model)
    if (key.rfind("blocks.", 0) == 0) blocks.insert(key.substr(7, key.find('.', 7) - 7));
  c.depth = static_cast<int64_t>(blocks.size());
  c.heads = heads;
  const auto json_path = std::filesystem::path(checkpoint).parent_path() / "model.json";
  if (std::filesystem::exists(json_path)) {
    std::ifstream in(json_path);
    try {
      c.heads = nlohmann::json::parse(in).at("heads").get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(fmt::format("nabla-serve: {}: {}", json_path.string(), e.what()));
    }
  }
  if (c.num_classes != static_cast<int64_t>(labels_.size()) || c.dim % c.heads != 0)
    throw FormatError(fmt::format("nabla-serve: {}: {} classes (want {}), dim {} with {} heads",
                                  checkpoint, c.num_classes, labels_.size(), c.dim, c.heads));
  model_ = std::make_unique<nn::ViT>(c);
  model_->load_state_dict(model);
  model_->eval();
  model_->set_store_attention(true);  // one attention path whatever a request asks
}

std::string VitAdapter::describe() const {
  const nn::ViTConfig& c = model_->config();
  return fmt::format("vit_fashion_mnist: dim {} depth {} heads {} mlp {} patch {}", c.dim, c.depth,
                     c.heads, c.mlp_dim, c.patch_size);
}

std::vector<Prediction> VitAdapter::predict(const std::vector<const Input*>& batch) {
  NoGradGuard no_grad;
  std::vector<float> pixels;
  for (const Input* in : batch) pixels.insert(pixels.end(), in->pixels.begin(), in->pixels.end());
  const auto n = static_cast<int64_t>(batch.size());
  const Tensor images = div(sub(from_vector(pixels, {n, 1, kSide, kSide}), examples::kFashionMean),
                            examples::kFashionStd);
  const auto probs = softmax(model_->forward(images).to(kFloat64), 1).to_vector<double>();
  count_forward(n, n, n);  // one row per image, none padded
  const auto cls = mean(model_->cls_attention_map(), {1}).contiguous().to_vector<float>();
  const size_t classes = labels_.size(), cells = cls.size() / batch.size();
  std::vector<Prediction> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    Prediction p;
    p.probabilities.assign(probs.begin() + static_cast<std::ptrdiff_t>(i * classes),
                           probs.begin() + static_cast<std::ptrdiff_t>((i + 1) * classes));
    p.label = static_cast<int64_t>(
        std::max_element(p.probabilities.begin(), p.probabilities.end()) - p.probabilities.begin());
    if (batch[i]->want_attention)
      p.attention.assign(cls.begin() + static_cast<std::ptrdiff_t>(i * cells),
                         cls.begin() + static_cast<std::ptrdiff_t>((i + 1) * cells));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace nabla::serve
