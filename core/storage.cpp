#include "nabla/core/storage.h"

#include <cstring>

#include "nabla/core/allocator.h"
#include "nabla/core/live_objects.h"

namespace nabla {

Storage::Storage(size_t nbytes, bool zero_fill) : nbytes_(nbytes) {
  data_ = allocator::allocate(nbytes);  // throws before the count goes up
  detail::count_live(detail::kLiveStorages, 1);
  if (zero_fill) std::memset(data_, 0, allocator::size_class(nbytes));
}

Storage::~Storage() {
  allocator::deallocate(data_, nbytes_);
  detail::count_live(detail::kLiveStorages, -1);
}

}  // namespace nabla
