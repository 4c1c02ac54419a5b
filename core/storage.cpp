#include "core/storage.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace nabla {

Storage::Storage(size_t nbytes, bool zero_fill) : nbytes_(nbytes) {
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  data_ = std::aligned_alloc(64, rounded);
  if (!data_) throw std::bad_alloc();
  if (zero_fill) std::memset(data_, 0, rounded);
}

Storage::~Storage() { std::free(data_); }

}  // namespace nabla
