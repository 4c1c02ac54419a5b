// op_overhead: what one tiny op costs beyond its arithmetic. A chain of n adds y = y + b on
// numel-element float32 tensors, timed in one of three modes:
//   nograd  under NoGradGuard (nothing recorded)
//   grad    a and b require grad, so every add records a node (the graph is dropped after)
//   fwdbwd  as grad, then y.backward(ones) through the whole chain
// Prints ops=n so the runner can report microseconds per op.
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: per-op overhead of a chain of small adds"};
  bench::Options opt;
  std::string mode = "nograd";
  int64_t n = 1000, numel = 16;
  bench::add_common_options(app, opt);
  app.add_option("--mode", mode, "nograd | grad | fwdbwd")
      ->check(CLI::IsMember({"nograd", "grad", "fwdbwd"}));
  app.add_option("--n", n, "adds in the chain")->check(CLI::PositiveNumber);
  app.add_option("--numel", numel, "elements per tensor")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  Generator gen(0);
  Tensor a = randn({numel}, gen), b = randn({numel}, gen), g = ones({numel});
  if (mode != "nograd") {
    a.requires_grad_();
    b.requires_grad_();
  }
  auto chain = [&] {
    Tensor y = a;
    for (int64_t i = 0; i < n; ++i) y = add(y, b);
    return y;
  };
  const double base_rss = bench::peak_rss_mb();

  bench::Timing t;
  if (mode == "nograd") {
    NoGradGuard no_grad;
    t = bench::time_it(opt, [&] { chain(); });
  } else if (mode == "grad") {
    t = bench::time_it(opt, [&] { chain(); });
  } else {
    t = bench::time_it(opt, [&] {
      a.set_grad(Tensor());
      b.set_grad(Tensor());
      chain().backward(g);
    });
  }
  bench::report(t, base_rss, {{"ops", std::to_string(n)}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_op_overhead: {}\n", e.what());
  return 1;
}
