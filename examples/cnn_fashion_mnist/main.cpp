// cnn_fashion_mnist: a small convolutional network, or a hybrid of a convolutional stem and
// Transformer blocks, classifies Fashion-MNIST (Debian's dataset-fashion-mnist, the same data and
// split as vit_fashion_mnist). The models are described in models.h.
//
//   cnn_fashion_mnist                  the CNN (default budget: 10 epochs)
//   cnn_fashion_mnist --model hybrid   convolutional stem -> 2 pre-norm Transformer blocks
//
// Prints a progress bar, per-epoch test accuracy and loss, a confusion matrix; writes
// metrics.csv, loss.png (train and test loss), confusion.png, samples.png (one test image per
// class), each also as .svg, and a checkpoint (resume with --resume). Ends with a RESULT line.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "examples/cnn_fashion_mnist/models.h"
#include "examples/common/cli.h"
#include "examples/common/fashion_mnist.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Config {
  std::string model = "cnn";  // cnn | hybrid
  examples::CnnConfig net;
  double label_smoothing = 0.1;
  int epochs = 10;
  int64_t batch_size = 128, train_limit = 0, test_limit = 0;
  double lr = 2e-3, weight_decay = 0.05;
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/cnn_fashion_mnist";
  bool augment = false;
  bool resume = false, smoke = false;
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

struct Batch {
  Tensor images, labels;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli("A CNN, or a convolutional stem with attention, on Fashion-MNIST");
  cli.option("--model", c.model, "cnn, or hybrid (convolutional stem + Transformer blocks)")
      .option("--epochs", c.epochs, "training epochs")
      .option("--batch-size", c.batch_size, "images per batch")
      .option("--width", c.net.width, "channels of the first convolution (the second: 2x)")
      .option("--hidden", c.net.hidden, "CNN: classifier width")
      .option("--dropout", c.net.dropout, "CNN: dropout in the classifier")
      .option("--depth", c.net.depth, "hybrid: Transformer blocks")
      .option("--heads", c.net.heads, "hybrid: attention heads")
      .option("--mlp", c.net.mlp, "hybrid: feed-forward width")
      .flag("--augment", c.augment, "random horizontal flips and 2-pixel shifts while training")
      .option("--label-smoothing", c.label_smoothing, "cross-entropy label smoothing")
      .option("--lr", c.lr, "peak learning rate (AdamW)")
      .option("--weight-decay", c.weight_decay, "AdamW weight decay")
      .option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay")
      .option("--train-limit", c.train_limit, "use only this many training images (0 = all)")
      .option("--test-limit", c.test_limit, "use only this many test images (0 = all)")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "two short epochs on 256 train / 256 test images (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  if (c.model != "cnn" && c.model != "hybrid")
    throw ValueError(fmt::format("--model must be cnn or hybrid, got '{}'", c.model));
  if (c.net.width <= 0 || (2 * c.net.width) % c.net.heads != 0)
    throw ValueError(
        fmt::format("--width {} must be positive and 2 x width divisible by --heads {}",
                    c.net.width, c.net.heads));
  if (c.smoke) {
    c.train_limit = c.test_limit = 256;
    c.epochs = 2;
    c.warmup_steps = 2;
  }
  return std::nullopt;
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  if (c.threads > 0) set_num_threads(c.threads);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data ---------------------------------------------------------------------------------
  const examples::FashionData d = examples::load_fashion_mnist(c.train_limit, c.test_limit);
  fmt::print("cnn_fashion_mnist: {} train / {} test images, {}\n", d.train_x.size(0),
             d.test_x.size(0), runtime_info());
  data::DataLoader<Batch>::Options lopts;
  lopts.batch_size = c.batch_size;
  lopts.seed = c.seed;
  data::DataLoader<Batch> loader(d.train_x.size(0), lopts, [&](const std::vector<int64_t>& idx) {
    Tensor i = from_vector(idx, {static_cast<int64_t>(idx.size())});
    return Batch{index_select(d.train_x, 0, i), index_select(d.train.labels, 0, i)};
  });

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  std::shared_ptr<nn::Module> model;
  std::function<Tensor(const Tensor&)> logits_of;
  if (c.model == "cnn") {
    auto cnn = std::make_shared<examples::SmallCNN>(c.net);
    logits_of = [cnn](const Tensor& x) { return (*cnn)(x); };
    model = cnn;
  } else {
    auto hybrid = std::make_shared<examples::HybridViT>(c.net);
    logits_of = [hybrid](const Tensor& x) { return (*hybrid)(x); };
    model = hybrid;
  }
  optim::AdamW opt(model->parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  fmt::print("model: {} (width {}), {} parameters\n", c.model, c.net.width,
             model->num_parameters());
  fmt::print("{} steps ({} per epoch, batch {})\n", total_steps, steps_per_epoch, c.batch_size);

  // --- training -------------------------------------------------------------------------------
  examples::TrainingRun training(
      {.out = c.out,
       .resume = c.resume,
       .stop_after = c.stop_after,
       .steps_per_epoch = steps_per_epoch,
       .total_steps = total_steps,
       .metrics = {{"test_accuracy", "test accuracy"}, {"test_loss", "test loss", true}},
       .log_lr = true,
       .start = t0},
      *model, opt, sched.get(), loader);
  model->train();
  while (auto batch = training.next_batch(loader)) {
    Tensor logits = logits_of(c.augment ? examples::augment_fashion(batch->images) : batch->images);
    Tensor loss = cross_entropy(logits, batch->labels, {.label_smoothing = c.label_smoothing});
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched->step();
    if (training.step_done(loss.item(), batch->labels.numel())) {
      const auto e = examples::evaluate_fashion(*model, logits_of, d, c.label_smoothing);
      training.end_epoch({e.confusion.accuracy(), e.loss});
    }
  }
  if (training.stopped()) return 0;
  const double train_s = training.seconds();

  // --- report ---------------------------------------------------------------------------------
  const auto confusion =
      examples::evaluate_fashion(*model, logits_of, d, c.label_smoothing).confusion;
  const double test_acc = confusion.accuracy();
  confusion.print();
  examples::save_fashion_samples(d, c.out + "/samples.png");
  training.losses().plot(c.out + "/loss.png", "cnn_fashion_mnist (" + c.model + "): loss",
                         "cross-entropy");
  confusion.save_heatmap(c.out + "/confusion.png");
  fmt::print(
      "test accuracy {:.4f} after {} steps in {:.1f} s; wrote {}/metrics.csv and (.png, .svg) "
      "loss, confusion, samples\n",
      test_acc, training.step(), train_s, c.out);
  fmt::print(
      "RESULT example=cnn_fashion_mnist model={} test_accuracy={:.4f} steps={} params={} "
      "train_s={:.1f}\n",
      c.model, test_acc, training.step(), model->num_parameters(), train_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
