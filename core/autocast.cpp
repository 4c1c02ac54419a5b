#include "nabla/core/autocast.h"

#include <fstream>
#include <string>

namespace nabla::autocast {
namespace {
thread_local bool autocast_enabled = false;
}  // namespace

bool enabled() { return autocast_enabled; }

Scope::Scope(bool enable) : prev_(autocast_enabled) { autocast_enabled = enable; }
Scope::~Scope() { autocast_enabled = prev_; }

bool cpu_has_native_bf16() {
  // The kernel's flag names (arch/x86/include/asm/cpufeatures.h); gcc 12's
  // __builtin_cpu_supports does not know avx512bf16 on every target, /proc/cpuinfo does.
  static const bool native = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("flags", 0) != 0) continue;
      return line.find(" avx512_bf16") != std::string::npos ||
             line.find(" amx_bf16") != std::string::npos;
    }
    return false;
  }();
  return native;
}

}  // namespace nabla::autocast
