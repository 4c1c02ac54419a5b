// The autograd tour: the program to run first when learning how nabla's autograd works (a few
// seconds). Part 1 takes the worked example of docs/autograd.md section 8,
// loss = sum(softmax(Q K^T / sqrt 2) V), prints the graph its forward records, draws it, traces
// the backward node by node and checks every gradient against finite differences. Part 2 runs
// one TransformerEncoderLayer through the inspect tools of docs/inspect.md: the graph grouped by
// module, the profiler, the memory ledger and the gradient report (with one parameter detached
// on purpose, to show the report explaining why it got no gradient).
// Everything it writes lands in --out (runs/autograd_tour/).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "examples/autograd_tour/tour.h"
#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "nabla/nabla.h"

using namespace nabla;

// --out must be a directory the tour can write into: checked before anything runs, so that a bad
// path is one clear error rather than a failure after the first part.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw IOError(fmt::format("autograd_tour: cannot create the --out directory '{}': {}", dir,
                              ec.message()));
  const std::string probe = dir + "/.autograd_tour_write_test";
  if (!std::ofstream(probe))
    throw IOError(fmt::format("autograd_tour: cannot write into the --out directory '{}'", dir));
  std::filesystem::remove(probe, ec);
}

int run(int argc, char** argv) {
  examples::CommandLine cli{
      "A tour of nabla's autograd: a worked example traced and checked, then one Transformer "
      "encoder layer through the graph export, profiler, memory ledger and gradient report"};
  std::string out_dir = "runs/autograd_tour";
  uint64_t seed = 0;
  int threads = 0;
  bool smoke = false;
  tour::EncoderSettings settings;
  cli.option("--out", out_dir, "directory for the pictures, trace and CSV files");
  cli.option("--seed", seed, "seed of the encoder's weights and inputs");
  cli.option("--threads", threads, "threads (0: OMP_NUM_THREADS or every core)");
  cli.option("--collapse-depth", settings.collapse_depth,
             "module depth drawn as one box in encoder_graph.svg (0 = the whole model)");
  cli.option("--warmup", settings.warmup_steps, "training steps before the profiled one");
  cli.flag("--smoke", smoke, "the test suite's run: no warm-up steps (everything else the same)");
  if (auto exit_code = cli.parse(argc, argv)) return *exit_code;
  if (threads > 0) set_num_threads(threads);
  if (smoke) settings.warmup_steps = 0;
  settings.seed = seed;
  prepare_out_dir(out_dir);
  const auto t0 = std::chrono::steady_clock::now();

  const tour::WorkedExampleResult part1 = tour::worked_example(out_dir);
  const tour::EncoderResult part2 = tour::encoder_layer(out_dir, settings);

  // Central differences with h = 1e-6 in float64 are good to about 1e-9 here; a wrong gradient
  // is off by far more than 1e-6.
  const double bound = 1e-6;
  const bool gradients_ok = part1.max_abs_error <= bound;
  if (!gradients_ok)
    fmt::print("FAILED: a traced gradient differs from finite differences by {:.2e} > {:.0e}\n",
               part1.max_abs_error, bound);
  if (!part2.detached_explained)
    fmt::print("FAILED: the gradient report did not blame detach() for 'temperature'\n");
  fmt::print("everything is in {}/ (graph.svg, encoder_graph.svg, memory.png, trace.json, ...)\n",
             out_dir);
  fmt::print(
      "RESULT example=autograd_tour loss={:.4f} worked_nodes={} gradients_checked={} "
      "max_fd_error={:.3e} encoder_nodes={} boxes={} step_flops={} gemm_fraction={:.3f} "
      "peak_live_bytes={} detached_explained={} total_s={:.3f}\n",
      part1.loss, part1.graph_nodes, part1.gradients_checked, part1.max_abs_error,
      part2.graph_nodes, part2.boxes, part2.flops, part2.gemm_fraction, part2.peak_live_bytes,
      part2.detached_explained ? 1 : 0, examples::seconds_since(t0));
  return gradients_ok && part2.detached_explained ? 0 : 1;
}

int main(int argc, char** argv) { return nabla::examples::guarded_main(argc, argv, run); }
