#include "nabla/ops/kernels/kernels.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace nabla::kernels {
namespace {

bool tuned_from_environment() {
  const char* v = std::getenv("NABLA_KERNELS");
  return v == nullptr || std::string_view(v) != "reference";
}

std::atomic<bool>& tuned_flag() {
  static std::atomic<bool> flag{tuned_from_environment()};
  return flag;
}

}  // namespace

bool tuned_enabled() { return tuned_flag().load(std::memory_order_relaxed); }
void set_tuned_kernels(bool on) { tuned_flag().store(on, std::memory_order_relaxed); }

}  // namespace nabla::kernels
