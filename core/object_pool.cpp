#include "nabla/core/object_pool.h"

#include <new>

namespace nabla::detail {
namespace {

constexpr size_t kClassBytes = 64, kClasses = 32;  // 64 .. 2048 bytes
static_assert(alignof(std::max_align_t) <= kClassBytes);

struct FreeBlock {
  FreeBlock* next;
};

// One thread's lists; only that thread touches them.
struct Pool {
  FreeBlock* heads[kClasses] = {};
  size_t pooled_bytes = 0;
  void release() {
    for (FreeBlock*& head : heads) {
      while (head) {
        FreeBlock* b = head;
        head = b->next;
        ::operator delete(b);
      }
    }
    pooled_bytes = 0;
  }
};

constinit thread_local Pool* pool_of_thread = nullptr;  // null before first use, after exit

struct PoolOwner {
  Pool pool;
  PoolOwner() { pool_of_thread = &pool; }
  ~PoolOwner() {
    pool_of_thread = nullptr;  // blocks freed after this go straight to the system
    pool.release();
  }
  PoolOwner(const PoolOwner&) = delete;
  PoolOwner& operator=(const PoolOwner&) = delete;
};

Pool* pool() {
  if (pool_of_thread) return pool_of_thread;
  thread_local PoolOwner owner;
  return pool_of_thread;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooling = false;
#else
constexpr bool kPooling = true;
#endif

}  // namespace

void* pool_allocate(size_t bytes) {
  const size_t cls = (bytes + kClassBytes - 1) / kClassBytes;
  if (!kPooling || cls == 0 || cls > kClasses) return ::operator new(bytes);
  if (Pool* p = pool()) {
    FreeBlock*& head = p->heads[cls - 1];
    if (head) {
      FreeBlock* b = head;
      head = b->next;
      p->pooled_bytes -= cls * kClassBytes;
      return b;
    }
  }
  return ::operator new(cls* kClassBytes);  // the whole class: any block of it serves any request
}

void pool_deallocate(void* ptr, size_t bytes) noexcept {
  const size_t cls = (bytes + kClassBytes - 1) / kClassBytes;
  Pool* p = pool_of_thread;
  if (kPooling && cls > 0 && cls <= kClasses && p &&
      p->pooled_bytes + cls * kClassBytes <= kMaxPooledBytes) {
    auto* b = static_cast<FreeBlock*>(ptr);
    b->next = p->heads[cls - 1];
    p->heads[cls - 1] = b;
    p->pooled_bytes += cls * kClassBytes;
    return;
  }
  ::operator delete(ptr);
}

size_t pooled_bytes() { return pool_of_thread ? pool_of_thread->pooled_bytes : 0; }

void release_pooled() noexcept {
  if (pool_of_thread) pool_of_thread->release();
}

}  // namespace nabla::detail
