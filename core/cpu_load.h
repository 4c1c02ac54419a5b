// How many cores this process can use right now. A machine with a browser, a compile or another
// training run on one of its cores leaves fewer cores than threads; OpenMP threads that wait for
// a descheduled partner at every barrier then make a step 8-15x slower than one thread would
// (measured on a 2-core VM with one core kept busy). The monitor compares the CPU time the
// machine spent on our allowed cores with the time this process used, every kSampleInterval, and
// from that the number of cores other processes keep busy.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nabla::cpu_load {

inline constexpr auto kSampleInterval = std::chrono::milliseconds(250);

// Busy and total CPU seconds of the listed CPUs (all CPUs when `cpus` is empty), from the text
// of /proc/stat. Busy counts user, nice, system, irq, softirq and steal (time the hypervisor gave
// to others); idle and iowait are free.
struct CpuSeconds {
  double busy = 0, total = 0;
};
CpuSeconds parse_proc_stat(std::string_view text, const std::vector<int>& cpus);

// The cores a CFS quota grants, from the text of cgroup v2's cpu.max ("max 100000" or
// "150000 100000"); 0 when there is no quota.
double parse_cgroup_quota(std::string_view cpu_max);

// Cores free for us (1..allowed) when other processes keep `other_busy` of our `allowed` cores
// busy, moving from `current`. A core counts as taken once others use more than 0.35 of it, and
// as free again below 0.2: the gap keeps a load near a threshold from flipping the count.
int free_cores_for_load(int allowed, double other_busy, int current);

// Cores this process may run on (affinity mask, then a cgroup quota if smaller), at least 1.
int allowed_cores();

// The last reading of the machine.
struct Reading {
  int allowed = 1;
  double other_busy = 0;  // cores, averaged over the last interval
  int free_cores = 1;     // free_cores_for_load's answer
  bool measured = false;  // false until a whole interval has been sampled
};

// min(configured, the cores free now). Cheap (an atomic load) except once per
// kSampleInterval, when the calling thread reads /proc/stat; safe from any thread.
int available_threads(int configured);
Reading last_reading();
std::string describe();  // for runtime_info()

}  // namespace nabla::cpu_load
