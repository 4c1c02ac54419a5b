// Shared by the C++ benchmark programs: the common command line, timing (median of `reps` runs
// after `warmup` runs), peak RSS and the MEASURE line that bench/run.py parses. The Python
// counterparts in bench/py/common.py follow the same protocol, so both sides are measured alike.
//
// Protocol: every program takes --threads, --warmup, --reps plus its own options (the same
// options as its Python twin) and prints one line
//   MEASURE ms=<median> min_ms=<min> rss_mb=<peak RSS> base_rss_mb=<RSS after setup> threads=<n>
// followed by any extra key=value fields (flop=<count>, ops=<count>, ...).
#pragma once
#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace nabla::bench {

struct Options {
  int threads = 2;
  int warmup = 5;
  int reps = 30;
  // Non-empty: after timing, profile a few more runs and write <profile>.txt (the per-op table)
  // and <profile>.json (Chrome trace); the MEASURE line gains gemm_frac=<share of wall time>.
  std::string profile;
};

// Registers --threads, --warmup and --reps on app.
void add_common_options(CLI::App& app, Options& opt);
// Sets nabla's thread count (our OpenMP loops and OpenBLAS) and checks it took effect.
void apply_threads(const Options& opt);

// Peak resident set size of this process so far, in MiB (getrusage ru_maxrss).
double peak_rss_mb();

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double gemm_fraction = -1;  // set when --profile ran
};

// Median over `reps` individually timed calls after `warmup` untimed ones.
Timing summarize(std::vector<double> samples_ms);
// Runs fn under the profiler (see Options::profile) and writes the files; returns the GEMM share.
double profile_runs(const Options& opt, const std::function<void()>& fn);
template <class F>
Timing time_it(const Options& opt, F&& fn) {
  for (int i = 0; i < opt.warmup; ++i) fn();
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(opt.reps));
  for (int i = 0; i < opt.reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  Timing t = summarize(std::move(samples));
  if (!opt.profile.empty()) t.gemm_fraction = profile_runs(opt, fn);
  return t;
}

using Fields = std::vector<std::pair<std::string, std::string>>;
// Prints the MEASURE line (see the protocol above).
void report(const Timing& t, double base_rss_mb, const Fields& extra = {});

// "2048x128x384" -> {2048, 128, 384}; throws std::invalid_argument otherwise.
std::vector<int64_t> parse_dims(const std::string& s);

}  // namespace nabla::bench
