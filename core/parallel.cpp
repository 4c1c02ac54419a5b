#include "nabla/core/parallel.h"

#include <cblas.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "nabla/core/cpu_load.h"

namespace nabla {
namespace {

std::atomic<int>& configured_threads() {
  static std::atomic<int> n{std::max(1, omp_get_max_threads())};
  return n;
}

std::atomic<bool>& adaptive_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("NABLA_ADAPTIVE_THREADS");
    return v == nullptr || std::string_view(v) != "0";
  }()};
  return on;
}

std::atomic<bool>& deterministic_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("NABLA_DETERMINISTIC");
    return v != nullptr && std::string_view(v) == "1";
  }()};
  return on;
}

}  // namespace

void set_deterministic(bool on) { deterministic_flag().store(on, std::memory_order_relaxed); }
bool deterministic() { return deterministic_flag().load(std::memory_order_relaxed); }
int split_parts() { return deterministic() ? kDeterministicParts : num_threads(); }

int num_threads() { return configured_threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  if (n < 1) n = 1;
  configured_threads().store(n, std::memory_order_relaxed);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int active_threads() {
  const int n = num_threads();
  if (n <= 1 || !adaptive_flag().load(std::memory_order_relaxed)) return n;
  return cpu_load::available_threads(n);
}

void set_adaptive_threads(bool on) { adaptive_flag().store(on, std::memory_order_relaxed); }
bool adaptive_threads() { return adaptive_flag().load(std::memory_order_relaxed); }

std::string blas_kernel_set() { return openblas_get_corename(); }

std::string runtime_info() {
  const char* parallel = "unknown";
  switch (openblas_get_parallel()) {
    case 0:
      parallel = "sequential";
      break;
    case 1:
      parallel = "pthreads";
      break;
    case 2:
      parallel = "openmp";
      break;
  }
  return fmt::format(
      "nabla: {} threads (OpenMP), {} active ({}: {}){}; OpenBLAS {} [{}], core {}, {} threads; "
      "{}",
      num_threads(), active_threads(), adaptive_threads() ? "adaptive" : "fixed",
      cpu_load::describe(),
      deterministic() ? fmt::format(", deterministic ({} parts)", kDeterministicParts) : "",
      openblas_get_config(), parallel, openblas_get_corename(), openblas_get_num_threads(),
      machine::describe(machine::profile()));
}

}  // namespace nabla
