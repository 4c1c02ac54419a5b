#include "nabla/core/cpu_load.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <mutex>

namespace nabla::cpu_load {
namespace {

// A whole small file (/proc, /sys), or "" when it cannot be read.
std::string read_small_file(const char* path) {
  std::string text;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(got));
  ::close(fd);
  return text;
}

int64_t parse_int(std::string_view s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// cpu.max of this process's cgroup (v2), "" when there is none.
std::string own_cgroup_cpu_max() {
  const std::string cgroup = read_small_file("/proc/self/cgroup");
  const size_t at = cgroup.find("0::");
  if (at == std::string::npos) return "";
  const size_t end = cgroup.find('\n', at);
  const std::string dir = cgroup.substr(at + 3, end == std::string::npos ? end : end - at - 3);
  return read_small_file(("/sys/fs/cgroup" + dir + "/cpu.max").c_str());
}

double self_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(ru.ru_utime) + seconds(ru.ru_stime);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Monitor {
 public:
  Monitor() : cpus_(affinity_cpus()), allowed_(allowed_cores()) {
    free_cores_.store(allowed_, std::memory_order_relaxed);
  }

  int free_cores(int64_t now) {
    if (now >= next_sample_ns_.load(std::memory_order_relaxed)) sample(now);
    return free_cores_.load(std::memory_order_relaxed);
  }

  Reading reading() {
    std::lock_guard lock(mutex_);
    return {allowed_, other_busy_, free_cores_.load(std::memory_order_relaxed), measured_};
  }

 private:
  void sample(int64_t now) {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || now < next_sample_ns_.load(std::memory_order_relaxed)) return;
    next_sample_ns_.store(now + std::chrono::nanoseconds(kSampleInterval).count(),
                          std::memory_order_relaxed);
    const std::string stat = read_small_file("/proc/stat");
    if (stat.empty()) return;  // no /proc: keep every allowed core
    const CpuSeconds cpu = parse_proc_stat(stat, cpus_);
    const double self = self_cpu_seconds(), wall = 1e-9 * static_cast<double>(now);
    if (have_previous_ && wall > previous_wall_) {
      const double others = (cpu.busy - previous_cpu_.busy) - (self - previous_self_);
      other_busy_ = std::max(0.0, others / (wall - previous_wall_));
      const int current = free_cores_.load(std::memory_order_relaxed);
      free_cores_.store(free_cores_for_load(allowed_, other_busy_, current),
                        std::memory_order_relaxed);
      measured_ = true;
    }
    previous_cpu_ = cpu;
    previous_self_ = self;
    previous_wall_ = wall;
    have_previous_ = true;
  }

  const std::vector<int> cpus_;
  const int allowed_;
  std::atomic<int64_t> next_sample_ns_{0};
  std::atomic<int> free_cores_{1};
  std::mutex mutex_;  // guards the previous reading below
  bool have_previous_ = false, measured_ = false;
  CpuSeconds previous_cpu_;
  double previous_self_ = 0, previous_wall_ = 0, other_busy_ = 0;
};

Monitor& monitor() {
  static Monitor m;
  return m;
}

}  // namespace

CpuSeconds parse_proc_stat(std::string_view text, const std::vector<int>& cpus) {
  static const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  CpuSeconds out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with("cpu") || line.size() < 4 || line[3] == ' ') continue;  // per-CPU only
    const auto w = split_words(line);
    if (w.size() < 9) continue;
    const auto cpu = static_cast<int>(parse_int(w[0].substr(3)));
    if (!cpus.empty() && std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal
    const int64_t busy = parse_int(w[1]) + parse_int(w[2]) + parse_int(w[3]) + parse_int(w[6]) +
                         parse_int(w[7]) + parse_int(w[8]);
    const int64_t free = parse_int(w[4]) + parse_int(w[5]);
    out.busy += static_cast<double>(busy) / ticks_per_second;
    out.total += static_cast<double>(busy + free) / ticks_per_second;
  }
  return out;
}

double parse_cgroup_quota(std::string_view cpu_max) {
  const auto w = split_words(cpu_max.substr(0, cpu_max.find('\n')));
  if (w.size() != 2 || w[0] == "max") return 0;
  const int64_t quota = parse_int(w[0]), period = parse_int(w[1]);
  return quota > 0 && period > 0 ? static_cast<double>(quota) / static_cast<double>(period) : 0;
}

int free_cores_for_load(int allowed, double other_busy, int current) {
  auto free_with = [&](double taken_above) {
    return allowed - static_cast<int>(std::ceil(other_busy - taken_above));
  };
  const int fewer = free_with(0.35), more = free_with(0.2);  // more <= fewer
  int n = current;
  if (fewer < current) {
    n = fewer;
  } else if (more > current) {
    n = more;
  }
  return std::clamp(n, 1, std::max(1, allowed));
}

int allowed_cores() {
  auto cpus = affinity_cpus();
  int n = cpus.empty() ? static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))
                       : static_cast<int>(cpus.size());
  const double quota = parse_cgroup_quota(own_cgroup_cpu_max());
  if (quota > 0) n = std::min(n, static_cast<int>(quota));
  return std::max(1, n);
}

int available_threads(int configured) {
  return std::min(configured, monitor().free_cores(now_ns()));
}

Reading last_reading() { return monitor().reading(); }

std::string describe() {
  const Reading r = last_reading();
  if (!r.measured) return fmt::format("{} allowed cores, load not measured yet", r.allowed);
  return fmt::format("{} allowed cores, other processes busy on {:.2f} of them, {} free", r.allowed,
                     r.other_busy, r.free_cores);
}

}  // namespace nabla::cpu_load
