// cnn: a small convolutional classifier's training step, the same model as bench/py/cnn.py.
//   images (128, 1, 28, 28) -> Conv2d 3x3 pad 1 (1 -> 16) -> ReLU -> max_pool2d 2 -> Conv2d 3x3
//   pad 1 (16 -> 32) -> ReLU -> mean over the 14x14 positions -> Linear(32, 10) -> cross_entropy
// One step: zero_grad + forward + backward + AdamW step, on fixed seeded inputs. The model of
// the busy-machine report (bench/under_load.py runs it beside a CPU-bound process).
//
// flop (reported): forward 2*B*(28*28*16*9 + 14*14*32*16*9); a step counts 3x the forward.
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: small CNN, one training step"};
  bench::Options opt;
  bench::add_common_options(app, opt);
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const int64_t B = 128;
  manual_seed(0);
  nn::Conv2d conv1(1, 16, 3, {.padding = 1}), conv2(16, 32, 3, {.padding = 1});
  nn::Linear head(32, 10);
  std::vector<Tensor> params;
  for (const nn::Module* m : std::initializer_list<const nn::Module*>{&conv1, &conv2, &head})
    for (const Tensor& p : m->parameters()) params.push_back(p);
  optim::AdamW adamw(params, {.lr = 1e-3});
  Generator gen(1);
  const Tensor images = randn({B, 1, 28, 28}, gen);
  const Tensor labels = randint(0, 10, {B}, gen);
  const double base_rss = bench::peak_rss_mb();

  const bench::Timing t = bench::time_it(opt, [&] {
    adamw.zero_grad();
    Tensor h = max_pool2d(relu(conv1(images)), 2);
    h = relu(conv2(h));
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
