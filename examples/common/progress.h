// Terminal progress for the example trainers: a one-line bar with loss, accuracy, throughput and
// ETA (redrawn in place on a terminal, printed every `every` steps otherwise), and a metrics CSV.
#pragma once
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace nabla::examples {

class ProgressBar {
 public:
  // first_step: where a resumed run starts, so throughput and ETA count only this process's steps.
  // unit: what update()'s items count ("examples", "tokens"), shown as throughput per second.
  ProgressBar(std::string label, int64_t total_steps, int64_t every = 50, int64_t first_step = 0,
              std::string unit = "examples");
  // items: units processed in this step (for throughput).
  void update(int64_t step, const std::map<std::string, double>& metrics, int64_t items);
  void finish();

 private:
  std::string label_, unit_;
  int64_t total_, every_, first_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  int64_t items_ = 0;
};

class CsvLogger {
 public:
  CsvLogger(std::string path, std::vector<std::string> columns, bool append = false);
  void row(const std::vector<double>& values);

 private:
  std::string path_;
  size_t ncols_;
};

double seconds_since(std::chrono::steady_clock::time_point t0);

// Runs an example's main body and turns any exception into a one-line error and exit code 1,
// so bad flags or missing data never end in an abort.
int guarded_main(int argc, char** argv, int (*run)(int, char**));

}  // namespace nabla::examples
