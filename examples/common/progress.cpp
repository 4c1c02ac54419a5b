#include "examples/common/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "nabla/core/error.h"

namespace nabla::examples {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int guarded_main(int argc, char** argv, int (*run)(int, char**)) {
  // Line-buffered stdout so a log file or pipe shows each epoch as it ends, in order with the
  // progress bar on stderr.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

ProgressBar::ProgressBar(std::string label, int64_t total_steps, int64_t every, int64_t first_step,
                         std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total_steps),
      every_(every),
      first_(first_step),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t step, const std::map<std::string, double>& metrics,
                         int64_t items) {
  items_ += items;
  const bool last = step >= total_;
  if (!tty_ && step % every_ != 0 && !last) return;
  const double t = seconds_since(start_);
  const double frac = total_ > 0 ? static_cast<double>(step) / static_cast<double>(total_) : 1.0;
  const auto done = static_cast<double>(step - first_), left = static_cast<double>(total_ - step);
  const double eta = done > 0 ? t / done * left : 0;
  const int width = 24, filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::string m;
  for (const auto& [k, v] : metrics) m += fmt::format(" {} {:.4f}", k, v);
  const std::string line =
      fmt::format("{} [{}] {}/{}{} | {:.0f} {}/s | {:.0f}s elapsed, ETA {:.0f}s", label_, bar, step,
                  total_, m, static_cast<double>(items_) / std::max(t, 1e-9), unit_, t, eta);
  if (tty_)
    fmt::print(stderr, "\r{}\x1b[K", line);
  else
    fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (tty_) fmt::print(stderr, "\n");
}

CsvLogger::CsvLogger(std::string path, std::vector<std::string> columns, bool append)
    : path_(std::move(path)), ncols_(columns.size()) {
  std::ofstream out(path_, append ? std::ios::app : std::ios::trunc);
  if (!out) throw IOError(fmt::format("{}: cannot open metrics file", path_));
  if (!append || out.tellp() == 0) out << fmt::format("{}\n", fmt::join(columns, ","));
}

void CsvLogger::row(const std::vector<double>& values) {
  if (values.size() != ncols_)
    throw ValueError(fmt::format("{}: {} values for {} columns", path_, values.size(), ncols_));
  std::ofstream out(path_, std::ios::app);
  out << fmt::format("{}\n", fmt::join(values, ","));
}

}  // namespace nabla::examples
