// Memory for the small objects every recorded op makes: its autograd node, its output's
// TensorImpl and Storage headers. A forward pass records one node per op and frees them all after
// the backward, so a graph's nodes outlive glibc's per-thread cache (a few blocks per size) and
// each went through malloc's bins and their consolidation: ~400 instructions per recorded add in
// callgrind on a chain of 1000 (docs/perf.md); the two headers cost ~150 more in malloc and free
// even from that cache. These objects are allocated through PoolAllocator instead: a freed block
// waits in a list of its size class on the thread that freed it (64-byte classes up to 2 KiB, at
// most kMaxPooledBytes per thread) for the next one. Under AddressSanitizer every block goes to
// the system, so a use after free is still reported.
#pragma once
#include <cstddef>

namespace nabla::detail {

inline constexpr size_t kMaxPooledBytes = size_t{8} << 20;

void* pool_allocate(size_t bytes);
void pool_deallocate(void* p, size_t bytes) noexcept;
// Bytes of blocks waiting in the calling thread's lists (for tests).
size_t pooled_bytes();
// Gives the calling thread's waiting blocks back to the system (a test that needs an empty pool,
// or a thread done with a large graph).
void release_pooled() noexcept;

// For std::allocate_shared: the object and its reference counts in one pooled block.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as allocate_shared does
  T* allocate(size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

}  // namespace nabla::detail
