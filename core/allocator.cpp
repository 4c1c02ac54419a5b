#include "nabla/core/allocator.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define NABLA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define NABLA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define NABLA_POISON(p, n) ((void)(p), (void)(n))
#define NABLA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace nabla::allocator {
namespace {

size_t default_limit() {
  if (const char* mb = std::getenv("NABLA_CACHE_LIMIT_MB")) {
    try {
      return static_cast<size_t>(std::stoull(mb)) << 20;
    } catch (const std::exception&) {
      // an unreadable value keeps the default
    }
  }
  return size_t{1} << 30;
}

// Smaller blocks are kept per thread (SmallCache below): no lock, no map, no page faults.
constexpr size_t kMinCachedBlock = size_t{16} << 10;
// Blocks this large are not cached: their page faults cost little next to the work done on
// them, and a dead one held in the cache (a dataset's temporaries, say) would weigh on RSS.
constexpr size_t kMaxCachedBlock = size_t{32} << 20;
// A free block not reused while idle_factor x the peak live bytes have been allocated is
// returned to the system: a training step reuses its buffers within one step; the blocks of
// shapes that stopped coming (a dataset's temporaries, an earlier sequence length) age out.
// The factor starts at 2; a miss on a size that a sweep released doubles it, to 4: a ViT step
// allocates ~2.4x its peak, so at 2 every step page-faulted its swept blocks back in. Past 4 the
// length-bucketed trainers held far more idle memory for little time (docs/perf.md).
constexpr uint64_t kSweepEvery = 256;  // allocations between sweeps
constexpr uint64_t kMaxIdleFactor = 4;

// Blocks from this size on are mapped from the kernel directly and unmapped when released. Via
// malloc they would set glibc's dynamic mmap threshold (it rises to the largest block freed, up
// to 32 MiB, mallopt(3)), after which such blocks come from the heap, whose holes stay resident:
// a checkpointed training step's peak RSS then crept up by ~12% over 80 steps. Under
// AddressSanitizer its own allocator serves them, so overflows are still reported.
constexpr size_t kMapFromBlock = size_t{128} << 10;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapLargeBlocks = false;
#else
constexpr bool kMapLargeBlocks = true;
#endif

void* system_alloc_large(size_t bytes) {
  if (!kMapLargeBlocks || bytes < kMapFromBlock) return std::aligned_alloc(64, bytes);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;  // page-aligned, so 64-byte aligned
}

void system_free_large(void* p, size_t bytes) {
  if (!kMapLargeBlocks || bytes < kMapFromBlock)
    std::free(p);
  else
    ::munmap(p, bytes);
}

struct FreeBlock {
  void* ptr;
  uint64_t freed_at;  // the allocation clock (bytes allocated so far) when it was freed
};

struct Cache {
  std::mutex mutex;
  std::map<size_t, std::vector<FreeBlock>> free_blocks;  // block bytes -> oldest first
  // Live blocks larger than their request's size class -> their bytes (deallocate() is given
  // the request): the block is freed and cached with its own size.
  std::unordered_map<void*, size_t> fitted;
  AllocatorStats stats;
  size_t limit = default_limit();
  uint64_t clock = 0;  // bytes allocated so far
  uint64_t requests = 0;
  std::array<size_t, 64> swept{};  // a ring of the sizes the latest sweeps released
  size_t swept_count = 0;

  // The most recently freed block of the smallest cached size in [bytes, fit_ratio * bytes], or
  // null; the caller holds the mutex.
  void* take_cached(size_t bytes) {
    const double ratio = GradMode::enabled()
                             ? best_fit_ratio(false)
                             : std::max(best_fit_ratio(false), best_fit_ratio(true));
    const auto largest = static_cast<size_t>(ratio * static_cast<double>(bytes));
    auto it = free_blocks.lower_bound(bytes);
    while (it != free_blocks.end() && it->first <= largest && it->second.empty()) ++it;
    if (it == free_blocks.end() || it->first > largest) return nullptr;
    const size_t block = it->first;
    void* p = it->second.back().ptr;  // the most recently freed: likely still in cache
    if (block != bytes) {
      try {
        fitted.emplace(p, block);
      } catch (const std::bad_alloc&) {
        return nullptr;  // the system's block instead, never std::bad_alloc
      }
      stats.fit_extra_bytes += block - bytes;
      ++stats.fit_hits;
    }
    it->second.pop_back();
    stats.cached_bytes -= block;
    stats.allocated_bytes += bytes;
    stats.peak_allocated_bytes = std::max(stats.peak_allocated_bytes, stats.allocated_bytes);
    ++stats.hits;
    NABLA_UNPOISON(p, bytes);  // past the class stays poisoned: an overflow is still reported
    return p;
  }

  // Frees the cached blocks idle for longer than max_idle; the caller holds the mutex.
  void release_idle(uint64_t max_idle, bool sweep) {
    for (auto& [bytes, blocks] : free_blocks) {
      size_t keep_from = 0;
      while (keep_from < blocks.size() && clock - blocks[keep_from].freed_at >= max_idle) {
        NABLA_UNPOISON(blocks[keep_from].ptr, bytes);
        system_free_large(blocks[keep_from].ptr, bytes);
        stats.cached_bytes -= bytes;
        ++keep_from;
      }
      blocks.erase(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(keep_from));
      if (sweep && keep_from > 0) swept[swept_count++ % swept.size()] = bytes;
    }
  }
  void release_all() { release_idle(0, false); }
  void sweep() { release_idle(stats.idle_factor * stats.peak_allocated_bytes, true); }
  void note_miss(size_t bytes) {  // the caller holds the mutex
    const auto it = std::find(swept.begin(), swept.end(), bytes);
    if (it == swept.end()) return;
    *it = 0;
    if (stats.idle_factor < kMaxIdleFactor) stats.idle_factor *= 2;
  }
};

// Never destroyed: storages freed during static destruction still find it.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

// ----------------------------------------------------------------------------
// Blocks under 16 KiB: one free list per size class and thread. NOTE: glibc 2.36 serves
// aligned_alloc from its general bins, never from its per-thread tcache, so before this a chain
// of small ops spent ~40% of each recorded add in _int_malloc, _int_free and bin consolidation.
// A list holds at most kSmallListBytes; a block freed on another thread joins that thread's list.
constexpr size_t kSmallClasses = 32;  // 64..1024 by 64, then four per power of two below 16 KiB
constexpr size_t kSmallListBytes = size_t{1} << 20;
std::atomic<bool> small_cache_on{default_limit() > 0};

size_t small_index(size_t bytes) {  // bytes is a size class below kMinCachedBlock
  if (bytes <= 1024) return bytes / 64 - 1;
  const size_t p = std::bit_floor(bytes - 1);  // 1024 .. 8192
  return 16 + 4 * static_cast<size_t>(std::countr_zero(p) - 10) + (bytes - p) / (p / 4) - 1;
}

size_t small_class_bytes(size_t index) {  // the inverse of small_index
  if (index < 16) return (index + 1) * 64;
  const size_t p = size_t{1024} << ((index - 16) / 4);
  return p + ((index - 16) % 4 + 1) * (p / 4);
}

// A counter only its own thread writes: a relaxed load and a store, not a locked read-modify-write
// (a no-grad add costs ~0.1 us in all, docs/perf.md); other threads only read it.
template <class T>
void add_own(std::atomic<T>& counter, T delta) {
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

struct SmallCache {
  std::array<std::vector<void*>, kSmallClasses> lists;
  std::atomic<int64_t> small_live{0};    // small-block bytes allocated minus freed by this thread
  std::atomic<int64_t> small_cached{0};  // bytes waiting in `lists`
  std::atomic<uint64_t> allocated{0};    // bytes of every size this thread allocated, ever
  void release() {
    for (size_t i = 0; i < kSmallClasses; ++i) {
      for (void* p : lists[i]) {
        NABLA_UNPOISON(p, small_class_bytes(i));
        std::free(p);
      }
      lists[i].clear();
    }
    small_cached.store(0, std::memory_order_relaxed);
  }
};

// Every thread's SmallCache, so that live_bytes() and idle_cache_bytes() can sum their counters.
struct Registry {
  std::mutex mutex;
  std::vector<SmallCache*> caches;
  int64_t retired_small_live = 0;  // small_live of threads that have exited
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed, like cache()
  return *r;
}
// Small blocks allocated or freed by a thread whose SmallCache is already gone (thread exit).
std::atomic<int64_t> orphan_small_live{0};

thread_local SmallCache* small_cache_of_thread = nullptr;  // null before first use, after exit

struct SmallCacheOwner {
  SmallCache cache;
  SmallCacheOwner() {
    std::lock_guard lock(registry().mutex);
    registry().caches.push_back(&cache);
    small_cache_of_thread = &cache;
  }
  ~SmallCacheOwner() {
    small_cache_of_thread = nullptr;  // frees after thread exit go straight to free()
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      r.caches.erase(std::find(r.caches.begin(), r.caches.end(), &cache));
      r.retired_small_live += cache.small_live.load(std::memory_order_relaxed);
    }
    cache.release();
  }
  SmallCacheOwner(const SmallCacheOwner&) = delete;
  SmallCacheOwner& operator=(const SmallCacheOwner&) = delete;
};

SmallCache* small_cache() {
  thread_local SmallCacheOwner owner;
  return small_cache_of_thread;
}

void count_small_live(SmallCache* sc, int64_t delta) {
  if (sc)
    add_own(sc->small_live, delta);
  else
    orphan_small_live.fetch_add(delta, std::memory_order_relaxed);
}

void* allocate_small(SmallCache* sc, size_t bytes) {
  count_small_live(sc, static_cast<int64_t>(bytes));
  if (sc && small_cache_on.load(std::memory_order_relaxed)) {
    auto& list = sc->lists[small_index(bytes)];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      add_own(sc->small_cached, -static_cast<int64_t>(bytes));
      NABLA_UNPOISON(p, bytes);
      return p;
    }
  }
  void* p = std::aligned_alloc(64, bytes);
  if (!p) {
    count_small_live(sc, -static_cast<int64_t>(bytes));
    throw OutOfMemoryError(fmt::format("allocator: the system refused {} bytes", bytes));
  }
  return p;
}

void deallocate_small(void* ptr, size_t bytes) {
  SmallCache* sc = small_cache();
  count_small_live(sc, -static_cast<int64_t>(bytes));
  if (sc && small_cache_on.load(std::memory_order_relaxed)) {
    auto& list = sc->lists[small_index(bytes)];
    if ((list.size() + 1) * bytes <= kSmallListBytes) {
      NABLA_POISON(ptr, bytes);
      list.push_back(ptr);
      add_own(sc->small_cached, static_cast<int64_t>(bytes));
      return;
    }
  }
  std::free(ptr);
}

std::atomic<bool> peak_watch_on{false};
std::atomic<size_t> peak_live{0};

void note_peak() {
  const size_t live = live_bytes();
  size_t seen = peak_live.load(std::memory_order_relaxed);
  while (live > seen && !peak_live.compare_exchange_weak(seen, live)) {
  }
}

void* allocate_large(size_t bytes) {
  Cache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    c.clock += bytes;
    if (++c.requests % kSweepEvery == 0) c.sweep();
    if (void* p = c.take_cached(bytes)) return p;
  }
  void* p = system_alloc_large(bytes);
  if (!p) {
    // Memory may be sitting in the cache: give it back and try once more.
    {
      std::lock_guard lock(c.mutex);
      c.release_all();
    }
    p = system_alloc_large(bytes);
    if (!p)
      throw OutOfMemoryError(fmt::format(
          "allocator: the system refused {} bytes, even after the cache was freed", bytes));
  }
  std::lock_guard lock(c.mutex);
  c.stats.allocated_bytes += bytes;
  c.stats.peak_allocated_bytes = std::max(c.stats.peak_allocated_bytes, c.stats.allocated_bytes);
  ++c.stats.misses;
  c.note_miss(bytes);
  return p;
}

}  // namespace

void* allocate(size_t nbytes) {
  // Checked before rounding: a size class near SIZE_MAX would wrap to 0.
  if (nbytes > max_request())
    throw OutOfMemoryError(fmt::format(
        "allocator: cannot allocate {} bytes, more than this machine's {} bytes of memory and swap",
        nbytes, max_request()));
  const size_t bytes = size_class(nbytes);
  SmallCache* sc = small_cache();
  if (sc) add_own(sc->allocated, uint64_t{bytes});
  void* p = bytes < kMinCachedBlock ? allocate_small(sc, bytes) : allocate_large(bytes);
  if (peak_watch_on.load(std::memory_order_relaxed)) [[unlikely]]
    note_peak();
  return p;
}

void deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t bytes = size_class(nbytes);
  if (bytes < kMinCachedBlock) {
    deallocate_small(ptr, bytes);
    return;
  }
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.stats.allocated_bytes -= bytes;
  if (!c.fitted.empty()) {
    if (auto it = c.fitted.find(ptr); it != c.fitted.end()) {
      c.stats.fit_extra_bytes -= it->second - bytes;
      bytes = it->second;  // the block's own size, to cache or unmap
      c.fitted.erase(it);
    }
  }
  if (bytes > c.limit || bytes > kMaxCachedBlock) {
    system_free_large(ptr, bytes);
    return;
  }
  if (c.stats.cached_bytes + bytes > c.limit) c.release_all();
  NABLA_POISON(ptr, bytes);
  c.free_blocks[bytes].push_back({ptr, c.clock});
  c.stats.cached_bytes += bytes;
}

AllocatorStats stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.stats;
}

void reset_peak() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
}

void empty_cache() {
  if (SmallCache* sc = small_cache()) sc->release();
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.release_all();
}

void set_cache_limit(size_t bytes) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.limit = bytes;
  small_cache_on.store(bytes > 0);
  if (c.stats.cached_bytes > bytes) c.release_all();
}

size_t cache_limit() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.limit;
}

size_t live_bytes() {
  int64_t total = orphan_small_live.load(std::memory_order_relaxed);
  {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    total += static_cast<int64_t>(c.stats.allocated_bytes);
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  total += r.retired_small_live;
  for (const SmallCache* sc : r.caches) total += sc->small_live.load(std::memory_order_relaxed);
  return static_cast<size_t>(std::max<int64_t>(total, 0));
}

size_t idle_cache_bytes() {
  int64_t total = 0;
  {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    total += static_cast<int64_t>(c.stats.cached_bytes);
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const SmallCache* sc : r.caches) total += sc->small_cached.load(std::memory_order_relaxed);
  return static_cast<size_t>(std::max<int64_t>(total, 0));
}

uint64_t thread_allocated_bytes() {
  const SmallCache* sc = small_cache();
  return sc ? sc->allocated.load(std::memory_order_relaxed) : 0;
}

void start_peak_watch() {
  peak_live.store(live_bytes());
  peak_watch_on.store(true);
}

size_t peak_live_bytes() {
  note_peak();  // the current value counts too
  return peak_live.load();
}

void stop_peak_watch() { peak_watch_on.store(false); }

}  // namespace nabla::allocator
