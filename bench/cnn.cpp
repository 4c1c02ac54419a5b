// cnn: a small convolutional classifier's training step, the same model as bench/py/cnn.py.
//   images (128, 1, 28, 28) -> conv 3x3 pad 1 (1 -> 16) -> ReLU -> conv 3x3 stride 2 pad 1
//   (16 -> 32) -> ReLU -> mean over the 14x14 positions -> Linear(32, 10) -> cross_entropy
// One step: zero_grad + forward + backward + AdamW step, on fixed seeded inputs. The model of
// the busy-machine report (bench/under_load.py runs it beside a CPU-bound process).
//
// flop (reported): forward 2*B*(28*28*16*9 + 14*14*32*16*9); a step counts 3x the forward.
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: small CNN, one training step"};
  bench::Options opt;
  bench::add_common_options(app, opt);
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const int64_t B = 128;
  manual_seed(0);
  Tensor w1 = nn::init::kaiming_uniform_(empty({16, 1, 3, 3}), std::sqrt(5.0));
  Tensor w2 = nn::init::kaiming_uniform_(empty({32, 16, 3, 3}), std::sqrt(5.0));
  Tensor b1 = zeros({16}), b2 = zeros({32});
  nn::Linear head(32, 10);
  std::vector<Tensor> params{w1, b1, w2, b2};
  for (Tensor& p : params) p.requires_grad_();
  for (const Tensor& p : head.parameters()) params.push_back(p);
  optim::AdamW adamw(params, {.lr = 1e-3});
  Generator gen(1);
  const Tensor images = randn({B, 1, 28, 28}, gen);
  const Tensor labels = randint(0, 10, {B}, gen);
  const double base_rss = bench::peak_rss_mb();

  const bench::Timing t = bench::time_it(opt, [&] {
    adamw.zero_grad();
    Tensor h = relu(conv2d(images, w1, b1, 1, 1));
    h = relu(conv2d(h, w2, b2, 2, 1));
    Tensor loss = cross_entropy(head.forward(mean(h, {2, 3})), labels);
    loss.backward();
    adamw.step();
  });
  const double flop = 3.0 * 2 * B * (28 * 28 * 16 * 9 + 14 * 14 * 32 * 16 * 9);
  bench::report(t, base_rss, {{"flop", fmt::format("{:.0f}", flop)}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_cnn: {}\n", e.what());
  return 1;
}
