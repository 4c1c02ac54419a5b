#include "examples/common/fashion_mnist.h"

#include <algorithm>

#include "examples/common/plot.h"
#include "nabla/nabla.h"

namespace nabla::examples {
namespace {

data::ImageDataset thin(const data::ImageDataset& d, int64_t keep) {
  const int64_t n = d.images.size(0);
  if (keep <= 0 || keep >= n) return d;
  const int64_t step = n / keep;
  return {d.images.slice(0, 0, step * keep, step).contiguous(),
          d.labels.slice(0, 0, step * keep, step).contiguous()};
}

// (N, 28, 28) in [0, 1] -> (N, 1, 28, 28) normalised.
Tensor normalise(const Tensor& images) {
  return div(sub(images, kFashionMean), kFashionStd).unsqueeze(1).contiguous();
}

}  // namespace

const std::vector<std::string>& fashion_classes() {
  static const std::vector<std::string> names = {"T-shirt", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",  "Shirt",   "Sneaker",  "Bag",   "Boot"};
  return names;
}

FashionData load_fashion_mnist(int64_t train_limit, int64_t test_limit) {
  FashionData d;
  d.train = thin(data::read_mnist_style(data::kFashionMnistDir, "train"), train_limit);
  d.test = thin(data::read_mnist_style(data::kFashionMnistDir, "t10k"), test_limit);
  d.train_x = normalise(d.train.images);
  d.test_x = normalise(d.test.images);
  return d;
}

Tensor augment_fashion(const Tensor& images) {
  NoGradGuard no_grad;
  const int64_t n = images.size(0), h = images.size(2), w = images.size(3);
  const Tensor flip = lt(rand({n, 1, 1, 1}), 0.5);
  const Tensor mirrored =
      index_select(images, 3, arange(static_cast<double>(w - 1), -1.0, -1.0, kInt64));
  const Tensor padded =
      pad(where(flip, mirrored, images), {2, 2, 2, 2}, -kFashionMean / kFashionStd);
  const auto offset = randint(0, 5, {2}).to_vector<int64_t>();
  return padded.narrow(2, offset[0], h).narrow(3, offset[1], w).contiguous();
}

Evaluation evaluate_fashion(nn::Module& model,
                            const std::function<Tensor(const Tensor&)>& logits_of,
                            const FashionData& d, double label_smoothing) {
  NoGradGuard no_grad;
  model.eval();
  Evaluation e{ConfusionMatrix(fashion_classes())};
  const CrossEntropyOptions summed{.label_smoothing = label_smoothing, .reduction = Reduction::Sum};
  const int64_t n_test = d.test_x.size(0), eb = 500;
  for (int64_t s = 0; s < n_test; s += eb) {
    const int64_t len = std::min(eb, n_test - s);
    const Tensor logits = logits_of(d.test_x.narrow(0, s, len)),
                 y = d.test.labels.narrow(0, s, len);
    e.loss += cross_entropy(logits, y, summed).item() / static_cast<double>(n_test);
    e.confusion.add(y, argmax(logits, -1));
  }
  model.train();
  return e;
}

void save_fashion_samples(const FashionData& d, const std::string& path) {
  viz::ImageGrid grid{.rows = 28, .cols = 28, .per_row = 5, .scale = 3, .title = "Fashion-MNIST"};
  const auto labels = d.test.labels.to_vector<int64_t>();
  const auto& classes = fashion_classes();
  for (int64_t cls = 0; cls < static_cast<int64_t>(classes.size()); ++cls)
    if (auto at = std::find(labels.begin(), labels.end(), cls); at != labels.end()) {
      grid.images.push_back(d.test.images.select(0, at - labels.begin())
                                .to(kFloat64)
                                .contiguous()
                                .to_vector<double>());
      grid.captions.push_back(classes[static_cast<size_t>(cls)]);
    }
  viz::image_grid(path, grid);
}

}  // namespace nabla::examples
