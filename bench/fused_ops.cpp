// fused_ops: the fused, performance-critical ops on float32 inputs of --shape, timed forward
// only (--mode fwd: nothing requires grad, nothing is recorded) or forward + backward
// (--mode fwdbwd: x, and layer_norm's weight and bias, require grad; backward takes a fixed random
// output gradient, or none for the scalar cross_entropy loss; grads are reset every run).
//   softmax        softmax(x, -1)
//   layer_norm     layer_norm over the last dim with weight and bias (as nn.LayerNorm)
//   gelu           exact (erf) GELU
//   cross_entropy  x is logits (N, C, ...), target int64 (N, ...) in [0, C), mean reduction
//   dropout        p = 0.1, training
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: fused ops, forward and forward+backward"};
  bench::Options opt;
  std::string op = "softmax", mode = "fwd", shape = "2048x512";
  bench::add_common_options(app, opt);
  app.add_option("--op", op, "softmax | layer_norm | gelu | cross_entropy | dropout")
      ->check(CLI::IsMember({"softmax", "layer_norm", "gelu", "cross_entropy", "dropout"}));
  app.add_option("--mode", mode, "fwd | fwdbwd")->check(CLI::IsMember({"fwd", "fwdbwd"}));
  app.add_option("--shape", shape, "input shape, e.g. 2048x512 or 32x4x64x64");
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const std::vector<int64_t> dims = bench::parse_dims(shape);
  if (dims.size() < 2) throw std::invalid_argument("--shape needs at least 2 dims");
  Generator gen(0);
  Tensor x = randn(Shape(dims.begin(), dims.end()), gen);
  const int64_t last = dims.back();
  Tensor weight = ones({last}), bias = zeros({last});
  // cross_entropy: classes on dim 1, the target drops that dim.
  Shape target_shape(dims.begin(), dims.end());
  target_shape.erase(target_shape.begin() + 1);
  Tensor target = randint(0, dims[1], target_shape, gen);

  auto forward = [&]() -> Tensor {
    if (op == "softmax") return softmax(x, -1);
    if (op == "layer_norm") return layer_norm(x, {last}, weight, bias);
    if (op == "gelu") return gelu(x);
    if (op == "cross_entropy") return cross_entropy(x, target);
    return dropout(x, 0.1, true, gen);
  };

  const double base_rss = bench::peak_rss_mb();
  bench::Timing t;
  if (mode == "fwd") {
    NoGradGuard no_grad;
    t = bench::time_it(opt, [&] { forward(); });
  } else {
    x.requires_grad_();
    if (op == "layer_norm") {
      weight.requires_grad_();
      bias.requires_grad_();
    }
    Tensor y0 = forward();
    Tensor g = y0.dim() == 0 ? Tensor() : randn(y0.shape(), gen);
    y0 = Tensor();
    t = bench::time_it(opt, [&] {
      x.set_grad(Tensor());
      weight.set_grad(Tensor());
      bias.set_grad(Tensor());
      forward().backward(g);
    });
  }
  bench::report(t, base_rss, {{"elems", std::to_string(x.numel())}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_fused_ops: {}\n", e.what());
  return 1;
}
