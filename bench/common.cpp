#include "bench/common.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "nabla/core/error.h"
#include "nabla/core/inspect/profiler.h"
#include "nabla/core/parallel.h"

namespace nabla::bench {

void add_common_options(CLI::App& app, Options& opt) {
  app.add_option("--threads", opt.threads, "threads for OpenMP loops and BLAS")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", opt.warmup, "untimed runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--reps", opt.reps, "timed runs (the median is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option(
      "--profile", opt.profile,
      "after timing: --reps runs profiled (profiled_ms=), then 3 into PATH.txt and PATH.json");
}

void profile_runs(const Options& opt, const std::function<void()>& fn, Timing& t) {
  {  // the cost of profiling: the median of `reps` runs with the profiler on
    inspect::Profiler profiler;
    std::vector<double> samples;
    for (int i = 0; i < opt.reps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      fn();
      auto t1 = std::chrono::steady_clock::now();
      samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    profiler.stop();
    t.profiled_ms = summarize(std::move(samples)).median_ms;
  }
  constexpr int kProfiledRuns = 3;  // what the files show
  inspect::Profiler profiler;
  for (int i = 0; i < kProfiledRuns; ++i) fn();
  const inspect::Profile profile = profiler.stop();
  t.gemm_fraction = profile.gemm_fraction();
  const std::string table_path = opt.profile + ".txt";
  std::ofstream table(table_path);
  table << fmt::format("{} runs, {:.3f} ms wall\n", kProfiledRuns,
                       static_cast<double>(profile.wall_ns) / 1e6)
        << profile.table(inspect::GroupBy::Op, 40) << "\n"
        << profile.table(inspect::GroupBy::OpAndShape, 40);
  if (!table) throw IOError(fmt::format("bench --profile: cannot write '{}'", table_path));
  profile.write_chrome_trace(opt.profile + ".json");
}

void apply_threads(const Options& opt) {
  set_num_threads(opt.threads);
  if (num_threads() != opt.threads)
    throw std::runtime_error(
        fmt::format("bench: asked for {} threads, got {}", opt.threads, num_threads()));
}

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

Timing summarize(std::vector<double> samples_ms) {
  if (samples_ms.empty()) return {};
  std::sort(samples_ms.begin(), samples_ms.end());
  const size_t n = samples_ms.size();
  const double median =
      n % 2 ? samples_ms[n / 2] : 0.5 * (samples_ms[n / 2 - 1] + samples_ms[n / 2]);
  return {median, samples_ms.front()};
}

void report(const Timing& t, double base_rss_mb, const Fields& extra) {
  std::string line =
      fmt::format("MEASURE ms={:.6g} min_ms={:.6g} rss_mb={:.1f} base_rss_mb={:.1f} threads={}",
                  t.median_ms, t.min_ms, peak_rss_mb(), base_rss_mb, num_threads());
  if (t.gemm_fraction >= 0)
    line += fmt::format(" gemm_frac={:.3f} profiled_ms={:.6g}", t.gemm_fraction, t.profiled_ms);
  for (const auto& [k, v] : extra) line += fmt::format(" {}={}", k, v);
  fmt::print("{}\n", line);
  std::fflush(stdout);
  fmt::print(stderr, "{}\n", runtime_info());  // what the adaptive thread count saw
}

std::vector<int64_t> parse_dims(const std::string& s) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find('x', pos);
    if (end == std::string::npos) end = s.size();
    const std::string part = s.substr(pos, end - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(fmt::format("bad shape '{}', want e.g. 2048x512", s));
    dims.push_back(std::stoll(part));
    pos = end + 1;
  }
  return dims;
}

}  // namespace nabla::bench
