// parallel_grain: where running a loop on two threads starts to pay, the measurement behind
// parallel_grain() (core/parallel.h). For sizes from 1K to 1M float32 elements it times one loop
// run serially and the same loop forced through an OpenMP region (parallel_for with a cost far
// above the grain), median of --reps calls each, and prints one line per size, then
//   RESULT bench=parallel_grain op=<op> crossover_elems=<n> grain_elems=<n>
// crossover_elems: the smallest size from which the parallel loop is at least 10% faster;
// grain_elems: the size from which parallel_for goes parallel for this loop's cost per element.
//   add  y = a + b (memory-bound, cost 1 per element in nabla's kernels)
//   exp  y = exp(a) with vec_math's float exp (compute-bound, cost 8)
// No PyTorch twin: this calibrates nabla itself.
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/nabla.h"
#include "nabla/ops/vec_math.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: the size where an OpenMP loop starts to pay"};
  bench::Options opt;
  opt.reps = 300;
  std::string op = "add";
  bench::add_common_options(app, opt);
  app.add_option("--op", op, "add | exp")->check(CLI::IsMember({"add", "exp"}));
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const int64_t cost = op == "add" ? 1 : 8;
  int64_t crossover = -1;
  for (int64_t n = 1024; n <= (int64_t{1} << 20); n *= 2) {
    std::vector<float> a(static_cast<size_t>(n), 0.5f), b(a), y(a);
    auto body = [&](int64_t lo, int64_t hi) {
      if (op == "add") {
        for (int64_t i = lo; i < hi; ++i) y[i] = a[i] + b[i];
      } else {
        for (int64_t i = lo; i < hi; ++i) y[i] = vec_math::exp(a[i]);
      }
    };
    const double serial = bench::time_it(opt, [&] { body(0, n); }).median_ms;
    const double threaded =
        bench::time_it(opt, [&] { parallel_for(n, parallel_grain(), body); }).median_ms;
    fmt::print("{} n={} serial_us={:.2f} parallel_us={:.2f} speedup={:.2f}\n", op, n, serial * 1e3,
               threaded * 1e3, serial / threaded);
    if (crossover < 0 && threaded < serial * 0.9) crossover = n;
  }
  fmt::print("RESULT bench=parallel_grain op={} crossover_elems={} grain_elems={} threads={}\n", op,
             crossover, parallel_grain() / cost, opt.threads);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_parallel_grain: {}\n", e.what());
  return 1;
}
