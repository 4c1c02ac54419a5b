// vit_fashion_mnist: a Vision Transformer (nn::ViT, Dosovitskiy et al. 2020) classifies
// Fashion-MNIST (Debian's dataset-fashion-mnist: 60000 train / 10000 test 28x28 grayscale
// images of 10 kinds of clothing).
//
//   image (1, 28, 28), normalised -> 4x4 patches of 7x7 -> linear patch embedding + CLS token
//         + learned positions -> N x pre-norm Transformer block -> LayerNorm -> CLS -> Linear
//
// Prints a progress bar, per-epoch test accuracy and loss, a confusion matrix; writes
// metrics.csv, loss.png (train and test loss), confusion.png, attention.png (the last block's CLS
// attention over the patches, averaged over heads, for 6 test images), samples.png (one test
// image per class), each also as .svg, and a checkpoint (resume with --resume). Ends with a
// RESULT line. Under `mpirun -np N` the N processes train data-parallel
// (examples/common/data_parallel.h): each takes 1/N of every batch of --global-batch images.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "examples/common/bf16.h"
#include "examples/common/cli.h"
#include "examples/common/data_parallel.h"
#include "examples/common/fashion_mnist.h"
#include "examples/common/int8_eval.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "examples/common/training_run.h"
#include "examples/vit_fashion_mnist/vit_model.h"
#include "nabla/data/dataloader.h"
#include "nabla/data/idx.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Config {
  // The default size lives in vit_model.h (examples/distill's teacher is this model).
  int64_t dim = examples::FashionVitSize{}.dim, depth = examples::FashionVitSize{}.depth,
          heads = examples::FashionVitSize{}.heads, mlp = examples::FashionVitSize{}.mlp,
          patch = examples::FashionVitSize{}.patch;
  double dropout = 0.0, label_smoothing = 0.1;
  int epochs = 10;
  // Batches of 64 run faster per image than 128 here (the activations stay in cache).
  int64_t batch_size = 64, train_limit = 0, test_limit = 0;
  int64_t global_batch = 0;  // images per step over all processes; 0: batch_size
  double lr = 3e-3, weight_decay = 0.05;
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/vit_fashion_mnist";
  bool augment = false;  // random flips and shifts (the longer setting)
  bool resume = false, smoke = false;
  bool checkpoint_layers = false;  // recompute the blocks' activations in backward
  bool int8 = false;               // also evaluate with int8 Linear layers (nn::quantize_dynamic)
  bool bf16 = false;               // forward passes under bf16 autocast (core/autocast.h)
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

struct Batch {
  Tensor images, labels;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli("Vision Transformer on Fashion-MNIST (Debian's dataset-fashion-mnist)");
  cli.option("--epochs", c.epochs, "training epochs")
      .option("--batch-size", c.batch_size, "images per batch")
      .option("--global-batch", c.global_batch,
              "images per step over all processes under mpirun, each taking 1/N (default: "
              "--batch-size)")
      .option("--dim", c.dim, "token width")
      .option("--depth", c.depth, "Transformer blocks")
      .option("--heads", c.heads, "attention heads")
      .option("--mlp", c.mlp, "feed-forward width")
      .option("--patch", c.patch, "patch size (must divide 28)")
      .flag("--augment", c.augment, "random horizontal flips and 2-pixel shifts while training")
      .option("--dropout", c.dropout, "dropout inside the blocks")
      .option("--label-smoothing", c.label_smoothing, "cross-entropy label smoothing")
      .option("--lr", c.lr, "peak learning rate (AdamW)")
      .option("--weight-decay", c.weight_decay, "AdamW weight decay")
      .option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay")
      .option("--train-limit", c.train_limit, "use only this many training images (0 = all)")
      .option("--test-limit", c.test_limit, "use only this many test images (0 = all)")
      .flag("--checkpoint-layers", c.checkpoint_layers,
            "gradient checkpointing: recompute the blocks in backward (less memory)")
      .flag("--int8", c.int8, "after training, evaluate in float32 and with int8 Linear layers")
      .flag("--bf16", c.bf16, "forward passes under bf16 autocast (oneDNN; master weights float32)")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "two short epochs on 256 train / 256 test images (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return exit_code;
  if (c.global_batch > 0) c.batch_size = c.global_batch;
  if (c.patch <= 0 || 28 % c.patch != 0) throw ValueError("--patch must divide 28");
  return std::nullopt;
}

examples::FashionData load_data(Config& c) {
  if (c.smoke) {
    c.train_limit = 256;
    c.test_limit = 256;
    c.epochs = 2;
    c.depth = std::min<int64_t>(c.depth, 2);
  }
  return examples::load_fashion_mnist(c.train_limit, c.test_limit);
}

nn::ViTConfig vit_config(const Config& c) {
  return examples::fashion_vit_config({c.dim, c.depth, c.heads, c.mlp, c.patch, c.dropout});
}

examples::Evaluation evaluate(nn::ViT& model, const examples::FashionData& d, double smoothing,
                              bool bf16) {
  return examples::evaluate_fashion(
      model,
      [&](const Tensor& x) {
        autocast::Scope autocast_scope(bf16);
        return model.forward(x);
      },
      d, smoothing);
}

// The last block's CLS attention over the patch grid, averaged over heads, for the first 6 test
// images, drawn over them; captions are "true/predicted".
void save_attention(nn::ViT& model, const examples::FashionData& d, const std::string& path) {
  NoGradGuard no_grad;
  model.eval();
  model.set_store_attention(true);
  const int64_t k = std::min<int64_t>(6, d.test_x.size(0));
  const Tensor pred = argmax(model.forward(d.test_x.narrow(0, 0, k)), -1);
  const Tensor att = mean(model.cls_attention_map(), {1}).contiguous();  // (k, gh, gw)
  model.set_store_attention(false);
  viz::PatchAttention drawing;
  drawing.rows = drawing.cols = 28;
  drawing.grid_rows = static_cast<int>(model.grid()[0]);
  drawing.grid_cols = static_cast<int>(model.grid()[1]);
  drawing.images = d.test.images.narrow(0, 0, k).contiguous().to_vector<float>();
  drawing.maps = att.to_vector<float>();
  const auto p = pred.to_vector<int64_t>(), y = d.test.labels.narrow(0, 0, k).to_vector<int64_t>();
  for (size_t b = 0; b < p.size(); ++b)
    drawing.captions.push_back(examples::fashion_classes()[static_cast<size_t>(y[b])] + "/" +
                               examples::fashion_classes()[static_cast<size_t>(p[b])]);
  drawing.title = "CLS attention of the last block (mean over heads); true/predicted";
  viz::patch_attention_strip(path, drawing, 6);
}

// The final evaluation, figures and the RESULT line (rank 0).
void report(nn::ViT& model, const examples::FashionData& d, const Config& c,
            const examples::TrainingRun& training, const examples::DataParallel& dp) {
  const double train_s = training.seconds();
  const examples::ConfusionMatrix confusion =
      evaluate(model, d, c.label_smoothing, c.bf16).confusion;
  const double test_acc = confusion.accuracy();
  confusion.print();
  save_attention(model, d, c.out + "/attention.png");
  examples::save_fashion_samples(d, c.out + "/samples.png");
  training.losses().plot(c.out + "/loss.png", "vit_fashion_mnist: loss", "cross-entropy");
  confusion.save_heatmap(c.out + "/confusion.png");
  fmt::print(
      "test accuracy {:.4f} after {} steps in {:.1f} s; wrote {}/metrics.csv and (.png, .svg) "
      "loss, confusion, attention, samples\n",
      test_acc, training.step(), train_s, c.out);
  const std::string int8_fields =
      c.int8
          ? examples::compare_int8(
                model,
                [&] { return evaluate(model, d, c.label_smoothing, false).confusion.accuracy(); })
          : "";
  fmt::print(
      "RESULT example=vit_fashion_mnist test_accuracy={:.4f} steps={} params={} "
      "train_s={:.1f}{}{}{}\n",
      test_acc, training.step(), model.num_parameters(), train_s, int8_fields,
      examples::bf16_field(c.bf16), examples::world_size_field(dp));
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  examples::DataParallel dp;
  c.bf16 = examples::use_bf16(c.bf16);
  if (c.threads > 0) set_num_threads(c.threads);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();

  // --- data ---------------------------------------------------------------------------------
  const examples::FashionData d = load_data(c);
  if (dp.writer())
    fmt::print("vit_fashion_mnist: {} train / {} test images, {}\n", d.train_x.size(0),
               d.test_x.size(0), runtime_info());
  data::DataLoader<Batch>::Options lopts;  // each rank its share of each batch (same seed)
  lopts.batch_size = dp.per_rank_batch(c.batch_size);
  lopts.seed = c.seed;
  lopts.rank = dp.rank();
  lopts.world_size = dp.world_size();
  data::DataLoader<Batch> loader(d.train_x.size(0), lopts, [&](const std::vector<int64_t>& idx) {
    Tensor i = from_vector(idx, {static_cast<int64_t>(idx.size())});
    return Batch{index_select(d.train_x, 0, i), index_select(d.train.labels, 0, i)};
  });

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  const auto model_ptr = std::make_shared<nn::ViT>(vit_config(c));
  nn::ViT& model = *model_ptr;
  dp.wrap(model_ptr);
  model.set_checkpoint_layers(c.checkpoint_layers);
  optim::AdamW opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  if (dp.writer()) {
    fmt::print("model: ViT dim {} depth {} heads {} mlp {}, {} patches + CLS, {} parameters\n",
               c.dim, c.depth, c.heads, c.mlp, model.grid()[0] * model.grid()[1],
               model.num_parameters());
    fmt::print("{} steps ({} per epoch, batch {})\n", total_steps, steps_per_epoch, c.batch_size);
    if (dp.world_size() > 1)
      fmt::print("data-parallel: {} processes, {} images each per step\n", dp.world_size(),
                 lopts.batch_size);
  }

  // --- training -------------------------------------------------------------------------------
  examples::TrainingRun training(
      {.out = c.out,
       .resume = c.resume,
       .stop_after = c.stop_after,
       .steps_per_epoch = steps_per_epoch,
       .total_steps = total_steps,
       .metrics = {{"test_accuracy", "test accuracy"}, {"test_loss", "test loss", true}},
       .log_lr = true,
       .writer = dp.writer(),
       .start = t0},
      model, opt, sched.get(), loader);
  dp.own_random_stream();
  model.train();
  while (auto batch = training.next_batch(loader)) {
    Tensor loss;
    {
      autocast::Scope autocast_scope(c.bf16);  // forward and loss; backward outside, as PyTorch's
      Tensor logits =
          model.forward(c.augment ? examples::augment_fashion(batch->images) : batch->images);
      loss = cross_entropy(logits, batch->labels, {.label_smoothing = c.label_smoothing});
    }
    opt.zero_grad();
    dp.backward(loss);  // loss.backward(); under mpirun, then the gradients' mean over processes
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    if (training.step_done(dp.mean(loss.item()), batch->labels.numel() * dp.world_size())) {
      // Rank 0 evaluates; the others go on to the next step and wait for it there.
      const examples::Evaluation e = dp.writer()
                                         ? evaluate(model, d, c.label_smoothing, c.bf16)
                                         : examples::Evaluation{examples::ConfusionMatrix({})};
      training.end_epoch({e.confusion.accuracy(), e.loss});
    }
  }
  if (training.stopped() || !dp.writer()) return 0;

  report(model, d, c, training, dp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::distributed_main(argc, argv, run); }
