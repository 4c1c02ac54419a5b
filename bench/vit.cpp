// vit: one ViT training step (zero_grad + forward + cross_entropy + backward + AdamW step), the
// same model as bench/py/vit.py: 28x28x1 images, 4x4 patches (49 + CLS = 50 tokens), dim 64,
// 4 heads, MLP 128, 6 pre-norm GELU blocks, dropout 0.1 inside the blocks (none on the
// embeddings, as the PyTorch reference), final LayerNorm, linear head on CLS, batch 128,
// 10 classes. Inputs (images, labels) are fixed and seeded, made once outside the timed step.
//
// flop (reported): per layer forward 8*N*d^2 (QKV + out projections) + 4*N*d*F (FFN)
// + 4*B*T^2*d (scores Q K^T and weights @ V), N = B*T tokens (T = 50), plus the patch embedding
// 2*B*49*16*64; a training step counts 3x the forward. Head and elementwise work are ignored.
// Also prints params=<count>. --bf16: forward and loss under autocast::Scope (the twin: under
// torch.autocast("cpu", dtype=torch.bfloat16)); backward and the step outside.
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/core/autocast.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: ViT training step on 28x28x1 images"};
  bench::Options opt;
  bool bf16 = false;
  bench::add_common_options(app, opt);
  app.add_flag("--bf16", bf16, "forward and loss under bf16 autocast");
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const int64_t B = 128, image = 28, patch = 4, dim = 64, heads = 4, mlp = 128, depth = 6,
                classes = 10;
  nn::ViTConfig vc;
  vc.image_size = image;
  vc.patch_size = patch;
  vc.in_channels = 1;
  vc.num_classes = classes;
  vc.dim = dim;
  vc.depth = depth;
  vc.heads = heads;
  vc.mlp_dim = mlp;
  vc.dropout = 0.1;
  vc.emb_dropout = 0.0;
  manual_seed(0);
  nn::ViT model(vc);
  model.train();
  optim::AdamW adamw(model.parameters(), {.lr = 1e-3});
  Generator gen(1);
  const Tensor images = randn({B, 1, image, image}, gen);
  const Tensor labels = randint(0, classes, {B}, gen);
  const double base_rss = bench::peak_rss_mb();

  // The forward flop count stated at the top of the file.
  const int64_t patches = (image / patch) * (image / patch), T = patches + 1;
  const double N = static_cast<double>(B * T), d = dim, F = mlp;
  const double per_layer = 8 * N * d * d + 4 * N * d * F + 4.0 * B * T * T * d;
  const double patch_embed = 2.0 * B * patches * (patch * patch) * dim;
  const double flop = 3 * (per_layer * depth + patch_embed);

  const bench::Timing t = bench::time_it(opt, [&] {
    adamw.zero_grad();
    Tensor loss;
    {
      autocast::Scope scope(bf16);
      loss = cross_entropy(model.forward(images), labels);
    }
    loss.backward();
    adamw.step();
  });
  bench::report(t, base_rss,
                {{"flop", fmt::format("{:.0f}", flop)},
                 {"params", std::to_string(model.num_parameters())},
                 {"bf16", std::to_string(int{bf16})}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_vit: {}\n", e.what());
  return 1;
}
