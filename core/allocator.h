// The caching allocator behind every tensor's Storage. A training step allocates and frees the
// same buffer sizes every time; handing those back to the C library means fresh pages, and a
// page first touched costs ~2.4 us per 4 KiB here, which is more than many ops' arithmetic. So
// freed blocks wait in per-size-class free lists and the next request of that class reuses one.
//
// Size classes: 64-byte multiples up to 1 KiB, then four classes per power of two (at most 25%
// rounding waste). Blocks under 16 KiB wait in lock-free per-thread lists (at most 1 MiB per
// class and thread), each reused by its own class only. Larger ones wait in one shared cache: a
// request takes a free block of its own class or, with a best-fit ratio r > 1, the smallest free
// block of at most r times its class (best fit, like PyTorch's CUDA caching allocator,
// c10/cuda/CUDACachingAllocator.cpp, but never split, so r bounds the waste). Such a block keeps
// its own size: it is cached and released with it. r is 2 while GradMode is off
// (NABLA_BEST_FIT_RATIO_NO_GRAD) and 1 otherwise (NABLA_BEST_FIT_RATIO; set_best_fit_ratio sets
// either): at 2, inference (encoder_infer, its buffers short-lived) shrinks by 2 MB, while the
// ViT's training step grew by 9 MB (saved activations placed for good in 2x blocks; docs/perf.md,
// "Inference: weights packed once").
// Blocks over 32 MiB are not cached; a free block not reused while idle_factor (2; 4 once a
// request missed on a size a sweep released) x the peak live bytes have been
// allocated goes back to the system; the cache holds at most `cache_limit` bytes
// (default 1 GiB or NABLA_CACHE_LIMIT_MB; past it, every free block is returned; 0 turns both
// caches off). Blocks of 128 KiB and more are mapped from the kernel directly (not malloc), so a
// released one leaves the process. Thread-safe.
//
// Live blocks are counted by the bytes of their request's size class (live_bytes(),
// allocated_bytes, thread_allocated_bytes(): what a storage asked for, the memory ledger's ground
// truth, core/inspect/memory_ledger.h, and the same whatever block served it); the bytes a
// best-fit block has beyond that class are AllocatorStats::fit_extra_bytes. Free blocks are
// counted by their own size (idle_cache_bytes(), cached_bytes). So the large blocks held from the
// system are allocated_bytes + fit_extra_bytes + cached_bytes. Each thread keeps its own counters,
// written only by that thread (a plain load and store, no atomic read-modify-write on the
// allocation path); a reader sums them. Under AddressSanitizer cached blocks are poisoned, so a use
// after free is still reported (and so are a best-fit block's bytes past the request's class). A
// request larger than the machine's memory plus swap (max_request()) is refused before it reaches
// malloc, and every failure is an OutOfMemoryError naming the bytes: never a crash, never
// std::bad_alloc.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nabla {

struct AllocatorStats {
  // Of blocks of 16 KiB and more (smaller ones bypass the cache and are not counted).
  size_t allocated_bytes = 0;       // in live storages (rounded to their size class)
  size_t peak_allocated_bytes = 0;  // the most allocated_bytes has been
  size_t cached_bytes = 0;          // free blocks held for reuse (their own sizes)
  size_t fit_extra_bytes = 0;       // live blocks' bytes beyond their request's size class
  uint64_t hits = 0;                // requests served from the cache
  uint64_t fit_hits = 0;            // of the hits, those served by a larger class's block
  uint64_t misses = 0;              // requests that went to the system
  uint64_t idle_factor = 2;         // a free block idle for this x peak bytes allocated is swept
};

namespace allocator {

// The size class `nbytes` is rounded up to (>= 64, a multiple of 64); nbytes <= max_request().
size_t size_class(size_t nbytes);
// The largest request allocate() attempts: physical memory plus swap.
size_t max_request();
// A 64-byte aligned block of at least size_class(nbytes) bytes. Throws OutOfMemoryError.
void* allocate(size_t nbytes);
// Returns a block from allocate(nbytes) (the same nbytes) to the cache.
void deallocate(void* ptr, size_t nbytes);

AllocatorStats stats();
void reset_peak();
// Returns every cached free block to the system (of the small blocks, the calling thread's).
void empty_cache();
// Bytes of free blocks the cache may hold; 0 turns caching off (and empties the cache).
void set_cache_limit(size_t bytes);
size_t cache_limit();
// A request that misses its own class may take a free block of up to `ratio` times it (1 to 16;
// 1: its own class only). Throws ValueError outside [1, 16]. no_grad: the ratio for requests
// made while GradMode is off (the larger of the two applies then).
void set_best_fit_ratio(double ratio, bool no_grad = false);
double best_fit_ratio(bool no_grad = false);

// Bytes of every live storage (blocks of any size, rounded to their size class). Exact when no
// other thread allocates or frees meanwhile.
size_t live_bytes();
// Free blocks held for reuse: the shared cache and every thread's small-block lists.
size_t idle_cache_bytes();
// Bytes the calling thread has allocated since it started (never decreases): the profiler's
// "bytes allocated" by an op is the difference across it.
uint64_t thread_allocated_bytes();
// While a watch is on, every allocation updates the highest live_bytes() seen (off, allocate()
// pays one relaxed load). start_peak_watch() begins at the current live bytes.
void start_peak_watch();
size_t peak_live_bytes();  // the highest live_bytes() since start_peak_watch()
void stop_peak_watch();

}  // namespace allocator
}  // namespace nabla
