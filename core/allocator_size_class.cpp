// The allocator's size classes and request limit (core/allocator.h), apart from its caches.
#include "nabla/core/allocator.h"

#include <sys/sysinfo.h>

#include <algorithm>
#include <bit>

namespace nabla::allocator {

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
