// The allocator's size classes, request limit and best-fit ratios (core/allocator.h), apart from
// its caches.
#include "nabla/core/allocator.h"

#include <fmt/format.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>

#include "nabla/core/error.h"

namespace nabla::allocator {
namespace {

// A miss may take a free block of up to ratio x its class (allocator.h: which ratio, and why).
bool valid_fit_ratio(double ratio) { return ratio >= 1.0 && ratio <= 16.0; }  // false for NaN
double ratio_from_env(const char* name, double fallback) {  // unreadable or out of range: fallback
  const double ratio = std::getenv(name) ? std::strtod(std::getenv(name), nullptr) : fallback;
  return valid_fit_ratio(ratio) ? ratio : fallback;
}
std::atomic<double> fit_ratio{ratio_from_env("NABLA_BEST_FIT_RATIO", 1.0)};
std::atomic<double> no_grad_fit_ratio{ratio_from_env("NABLA_BEST_FIT_RATIO_NO_GRAD", 2.0)};

}  // namespace

void set_best_fit_ratio(double ratio, bool no_grad) {
  if (!valid_fit_ratio(ratio))
    throw ValueError(fmt::format("allocator: best-fit ratio {} is not in [1, 16]", ratio));
  (no_grad ? no_grad_fit_ratio : fit_ratio).store(ratio);
}

double best_fit_ratio(bool no_grad) { return (no_grad ? no_grad_fit_ratio : fit_ratio).load(); }

size_t max_request() {
  // Read once: a request above it cannot succeed and, under AddressSanitizer, would abort the
  // process inside malloc instead of returning null.
  static const size_t limit = [] {
    struct sysinfo info {};
    if (::sysinfo(&info) != 0) return size_t{1} << 48;
    return (static_cast<size_t>(info.totalram) + info.totalswap) * info.mem_unit;
  }();
  return limit;
}

size_t size_class(size_t nbytes) {
  if (nbytes <= 1024) return std::max<size_t>(64, (nbytes + 63) / 64 * 64);
  const size_t step = std::bit_floor(nbytes - 1) / 4;  // four classes per power of two
  return (nbytes + step - 1) / step * step;
}

}  // namespace nabla::allocator
