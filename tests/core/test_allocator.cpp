#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "nabla/core/allocator.h"

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("allocator: size classes are 64-byte multiples with at most 25% waste", "[core]") {
  CHECK(allocator::size_class(0) == 64);
  CHECK(allocator::size_class(1) == 64);
  CHECK(allocator::size_class(65) == 128);
  CHECK(allocator::size_class(1024) == 1024);
  CHECK(allocator::size_class(1025) == 1280);
  CHECK(allocator::size_class(2048) == 2048);
  CHECK(allocator::size_class(2049) == 2560);
  for (size_t n : {size_t{3000}, size_t{65537}, size_t{1} << 20, (size_t{1} << 24) + 5}) {
    const size_t c = allocator::size_class(n);
    CHECK(c >= n);
    CHECK(c % 64 == 0);
    CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(n));
  }
}

TEST_CASE("allocator: a freed block is reused by the next request of its class", "[core]") {
  allocator::empty_cache();
  const auto before = allocator::stats();
  const void* first = nullptr;
  {
    Tensor a = empty({1000, 100});  // 400,000 bytes
    first = a.data_ptr<float>();
    CHECK(reinterpret_cast<uintptr_t>(first) % 64 == 0);
    CHECK(allocator::stats().allocated_bytes >= before.allocated_bytes + 400000);
  }
  CHECK(allocator::stats().cached_bytes >= 400000);
  Tensor b = empty({100, 1000});  // same bytes, other shape: same block
  CHECK(b.data_ptr<float>() == first);
  CHECK(allocator::stats().hits == before.hits + 1);
  Tensor z = zeros({100, 1000});  // a reused block must still come back zeroed when asked
  CHECK(sum(z).item() == 0.0);
}

TEST_CASE("allocator: blocks under 16 KiB are reused per thread, each by its own class", "[core]") {
  // Every small size class: a freed block comes back for the same class and never for another.
  std::vector<size_t> classes;
  for (size_t n = 1; allocator::size_class(n) < (size_t{16} << 10);
       n = allocator::size_class(n) + 1)
    classes.push_back(allocator::size_class(n));
  REQUIRE(classes.size() == 31);
  for (size_t i = 0; i < classes.size(); ++i) {
    INFO("class " << classes[i]);
    void* p = allocator::allocate(classes[i]);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    allocator::deallocate(p, classes[i]);
    if (i + 1 < classes.size()) {
      void* other = allocator::allocate(classes[i + 1]);
      CHECK(other != p);
      allocator::deallocate(other, classes[i + 1]);
    }
    void* again = allocator::allocate(classes[i]);
    CHECK(again == p);
    std::memset(again, 0xAB, classes[i]);  // the whole class is usable (ASan checks)
    allocator::deallocate(again, classes[i]);
  }
  allocator::empty_cache();
}

TEST_CASE("allocator: blocks under 16 KiB bypass the shared cache", "[core]") {
  const auto before = allocator::stats();
  { Tensor small = empty({1000}); }  // 4,000 bytes
  const auto after = allocator::stats();
  CHECK(after.hits + after.misses == before.hits + before.misses);
  CHECK(after.cached_bytes == before.cached_bytes);
}

TEST_CASE("allocator: empty_cache and the cache limit return memory", "[core]") {
  { Tensor a = empty({4096}); }
  CHECK(allocator::stats().cached_bytes > 0);
  allocator::empty_cache();
  CHECK(allocator::stats().cached_bytes == 0);

  const size_t old_limit = allocator::cache_limit();
  allocator::set_cache_limit(0);  // caching off
  { Tensor a = empty({4096}); }
  CHECK(allocator::stats().cached_bytes == 0);
  allocator::set_cache_limit(20000);
  { Tensor a = empty({4096}), b = empty({4096}); }  // 2 x 16 KiB > 20000: the second evicts
  CHECK(allocator::stats().cached_bytes <= 20000);
  allocator::set_cache_limit(old_limit);
}

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Sets the cache limit and the best-fit ratio for one test (the defaults may come from
// NABLA_CACHE_LIMIT_MB and NABLA_BEST_FIT_RATIO).
struct CacheLimit {
  size_t old = allocator::cache_limit();
  double old_ratio = allocator::best_fit_ratio();
  explicit CacheLimit(size_t bytes, double ratio = 2.0) {
    allocator::set_cache_limit(bytes);
    allocator::set_best_fit_ratio(ratio);
  }
  ~CacheLimit() {
    allocator::set_cache_limit(old);
    allocator::set_best_fit_ratio(old_ratio);
  }
  CacheLimit(const CacheLimit&) = delete;
  CacheLimit& operator=(const CacheLimit&) = delete;
};

#if !defined(__SANITIZE_ADDRESS__)
// Whether /proc/self/maps lists a mapping holding `p`.
bool is_mapped(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &from, &to) == 2 && from <= at && at < to) return true;
  }
  return false;
}
#endif

}  // namespace

TEST_CASE("allocator: a miss takes the smallest free block of at most twice its class", "[core]") {
  CacheLimit limit(size_t{1} << 30);
  allocator::empty_cache();
  void* four = allocator::allocate(4 * kMiB);
  void* five = allocator::allocate(5 * kMiB);
  allocator::deallocate(five, 5 * kMiB);
  allocator::deallocate(four, 4 * kMiB);
  const auto before = allocator::stats();
  const size_t live_before = allocator::live_bytes(), idle_before = allocator::idle_cache_bytes();
  REQUIRE(before.cached_bytes == 9 * kMiB);

  void* three = allocator::allocate(3 * kMiB);  // no 3 MiB block: the 4 MiB one, not the 5
  CHECK(three == four);
  std::memset(three, 0x5A, 3 * kMiB);  // the class is usable (ASan: it was unpoisoned)
  auto now = allocator::stats();
  CHECK(now.misses == before.misses);
  CHECK(now.hits == before.hits + 1);
  CHECK(now.fit_hits == before.fit_hits + 1);
  CHECK(now.cached_bytes == before.cached_bytes - 4 * kMiB);  // the block's real size
  CHECK(allocator::idle_cache_bytes() == idle_before - 4 * kMiB);
  // Live bytes count the request's class; the block's extra MiB is counted apart.
  CHECK(now.allocated_bytes == before.allocated_bytes + 3 * kMiB);
  CHECK(allocator::live_bytes() == live_before + 3 * kMiB);
  CHECK(now.fit_extra_bytes == before.fit_extra_bytes + kMiB);

  allocator::deallocate(three, 3 * kMiB);  // freed with the request's size ...
  now = allocator::stats();
  CHECK(now.cached_bytes == 9 * kMiB);  // ... cached with the block's own
  CHECK(allocator::idle_cache_bytes() == idle_before);
  CHECK(allocator::live_bytes() == live_before);
  CHECK(now.allocated_bytes == before.allocated_bytes);
  CHECK(now.fit_extra_bytes == before.fit_extra_bytes);
  void* again = allocator::allocate(4 * kMiB);  // its own class finds it, an exact hit
  CHECK(again == four);
  CHECK(allocator::stats().fit_hits == before.fit_hits + 1);
  allocator::deallocate(again, 4 * kMiB);
  allocator::empty_cache();
  CHECK(allocator::stats().cached_bytes == 0);
}

TEST_CASE("allocator: a free block more than twice the request's class is not taken", "[core]") {
  {
    CacheLimit exact_only(size_t{1} << 30, 1.0);  // ratio 1: only the request's own class
    allocator::empty_cache();
    void* four = allocator::allocate(4 * kMiB);
    allocator::deallocate(four, 4 * kMiB);
    const auto before = allocator::stats();
    void* three = allocator::allocate(3 * kMiB);
    CHECK(allocator::stats().misses == before.misses + 1);
    allocator::deallocate(three, 3 * kMiB);
    CHECK_THROWS_AS(allocator::set_best_fit_ratio(0.5), ValueError);
    CHECK_THROWS_AS(allocator::set_best_fit_ratio(std::nan("")), ValueError);
    CHECK(allocator::best_fit_ratio() == 1.0);
  }
  CacheLimit limit(size_t{1} << 30);
  allocator::empty_cache();
  void* sixteen = allocator::allocate(16 * kMiB);
  allocator::deallocate(sixteen, 16 * kMiB);
  auto before = allocator::stats();
  void* three = allocator::allocate(3 * kMiB);
  CHECK(allocator::stats().misses == before.misses + 1);
  CHECK(allocator::stats().cached_bytes == 16 * kMiB);
  allocator::deallocate(three, 3 * kMiB);
  allocator::empty_cache();

  void* six = allocator::allocate(6 * kMiB);  // exactly twice: taken
  allocator::deallocate(six, 6 * kMiB);
  before = allocator::stats();
  three = allocator::allocate(3 * kMiB);
  CHECK(three == six);
  CHECK(allocator::stats().misses == before.misses);
  allocator::deallocate(three, 3 * kMiB);
  allocator::empty_cache();
}

TEST_CASE("allocator: best fit applies while no graph is recorded, with its own ratio", "[core]") {
  CacheLimit exact_with_grad(size_t{1} << 30, 1.0);
  const double old_no_grad = allocator::best_fit_ratio(true);
  allocator::set_best_fit_ratio(2.0, true);
  CHECK(allocator::best_fit_ratio(true) == 2.0);
  CHECK(allocator::best_fit_ratio() == 1.0);
  allocator::empty_cache();
  void* four = allocator::allocate(4 * kMiB);
  allocator::deallocate(four, 4 * kMiB);
  auto before = allocator::stats();
  void* with_grad = allocator::allocate(3 * kMiB);  // grad mode on: its own class only
  CHECK(allocator::stats().misses == before.misses + 1);
  {
    NoGradGuard no_grad;
    before = allocator::stats();
    void* without = allocator::allocate(3 * kMiB);  // the free 4 MiB block
    CHECK(without == four);
    CHECK(allocator::stats().fit_hits == before.fit_hits + 1);
    allocator::deallocate(without, 3 * kMiB);
    allocator::set_best_fit_ratio(1.0, true);  // and off again
    before = allocator::stats();
    void* off = allocator::allocate(3 * kMiB);
    CHECK(allocator::stats().misses == before.misses + 1);
    allocator::deallocate(off, 3 * kMiB);
  }
  allocator::deallocate(with_grad, 3 * kMiB);
  CHECK_THROWS_AS(allocator::set_best_fit_ratio(20.0, true), ValueError);
  allocator::set_best_fit_ratio(old_no_grad, true);
  allocator::empty_cache();
}

TEST_CASE("allocator: a best-fit block freed past the cache limit leaves with its real size",
          "[core]") {
  CacheLimit limit(size_t{1} << 30);
  allocator::empty_cache();
  void* four = allocator::allocate(4 * kMiB);
  allocator::deallocate(four, 4 * kMiB);
  const auto before = allocator::stats();
  void* three = allocator::allocate(3 * kMiB);
  REQUIRE(three == four);
  allocator::set_cache_limit(2 * kMiB);  // the 4 MiB block no longer fits: released, not cached
  allocator::deallocate(three, 3 * kMiB);
  const auto after = allocator::stats();
  CHECK(after.cached_bytes == 0);
  CHECK(after.fit_extra_bytes == before.fit_extra_bytes);
  CHECK(after.allocated_bytes == before.allocated_bytes);
#if !defined(__SANITIZE_ADDRESS__)  // mapped from the kernel: its last MiB must be unmapped too
  CHECK_FALSE(is_mapped(static_cast<char*>(four) + 3 * kMiB));
#endif
}

TEST_CASE("allocator: two threads trading blocks of mixed sizes keep the counters exact",
          "[core]") {
  CacheLimit limit(size_t{1} << 30);
  allocator::empty_cache();
  const auto before = allocator::stats();
  const size_t live_before = allocator::live_bytes();
  // 64 KiB .. 320 KiB: each class within twice of several others, below and above 128 KiB.
  const std::array<size_t, 6> sizes{64 << 10, 96 << 10, 128 << 10, 160 << 10, 224 << 10, 320 << 10};
  auto work = [&](unsigned char tag) {
    std::array<std::pair<unsigned char*, size_t>, 3> held{};
    for (int i = 0; i < 3000; ++i) {
      auto& [p, n] = held[static_cast<size_t>(i) % held.size()];
      if (p) {  // the first and last 64 bytes still hold this thread's mark
        if (p[0] != tag || p[n - 1] != tag) throw std::runtime_error("a live block was reused");
        allocator::deallocate(p, n);
      }
      n = sizes[(static_cast<size_t>(i) * 7 + tag) % sizes.size()] - 64 * (i % 3);
      p = static_cast<unsigned char*>(allocator::allocate(n));
      std::memset(p, tag, 64);
      std::memset(p + n - 64, tag, 64);
    }
    for (auto& [p, n] : held) allocator::deallocate(p, n);
  };
  std::thread t1(work, 1), t2(work, 2);
  t1.join();
  t2.join();
  const auto after = allocator::stats();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(allocator::live_bytes() == live_before);
  CHECK(after.fit_extra_bytes == before.fit_extra_bytes);
  CHECK(after.fit_hits > before.fit_hits);  // best fit did happen
  CHECK(after.hits + after.misses == before.hits + before.misses + 6000);
  CHECK(after.cached_bytes <= allocator::idle_cache_bytes());
  allocator::empty_cache();
  CHECK(allocator::stats().cached_bytes == 0);
}

// A cycle that allocates more than twice its peak between two uses of a block, as a ViT's
// training step does: the sweep released that block each cycle and the next one page-faulted a
// new one in, until a miss on a swept size made the sweep wait longer.
TEST_CASE("allocator: a size the sweep released and then missed makes the sweep wait longer",
          "[core]") {
  CacheLimit limit(size_t{1} << 30, 1.0);
  allocator::empty_cache();
  allocator::reset_peak();
  void* held = allocator::allocate(4 * kMiB);  // live throughout: the peak is 7 MiB
  allocator::deallocate(allocator::allocate(3 * kMiB), 3 * kMiB);  // never asked for again
  // Three sweeps (one per 256 requests) a cycle, the last after the 1 MiB block waited 16-24 MiB:
  // more than 2x the peak, less than 4x.
  constexpr size_t kChurn = 32 << 10, kChurnPerCycle = 768;
  uint64_t misses_from_cycle_6 = 0;
  for (int cycle = 0; cycle < 12; ++cycle) {
    if (cycle == 6) misses_from_cycle_6 = allocator::stats().misses;
    allocator::deallocate(allocator::allocate(kMiB), kMiB);
    for (size_t i = 0; i < kChurnPerCycle; ++i)
      allocator::deallocate(allocator::allocate(kChurn), kChurn);
  }
  const auto after = allocator::stats();
  CHECK(after.idle_factor == 4);               // 2 swept the 1 MiB block every cycle
  CHECK(after.misses == misses_from_cycle_6);  // the last six cycles reused every block
  CHECK(after.cached_bytes == kMiB + kChurn);  // the 3 MiB block aged out all the same
  allocator::deallocate(held, 4 * kMiB);
  allocator::empty_cache();
}

#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's own allocator serves large blocks there
namespace {

double resident_mib() {  // /proc/self/statm: size resident ... in pages
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1048576.0;
}

}  // namespace

TEST_CASE("allocator: a released large block leaves the process, even in front of a live one",
          "[core]") {
  // Through malloc, freeing an 8 MiB block raises glibc's mmap threshold past 4 MiB, so the next
  // 4 MiB blocks come from the heap; one freed in front of a live one is a hole that stays
  // resident. Mapped directly, it is unmapped when the cache releases it.
  const int64_t big = int64_t{8} << 18, block = int64_t{4} << 18;  // float32: 8 MiB, 4 MiB
  allocator::empty_cache();
  { Tensor warm = ones({big}); }
  allocator::empty_cache();
  Tensor front = ones({block});
  Tensor back = ones({block});
  const double before = resident_mib();
  front = Tensor();
  allocator::empty_cache();
  CHECK(resident_mib() < before - 3.0);
  CHECK(back.data_ptr<float>()[block - 1] == 1.0f);  // the live block is untouched
}
#endif

TEST_CASE("allocator: concurrent allocation from several threads", "[core]") {
  allocator::empty_cache();
  const size_t live_before = allocator::stats().allocated_bytes;
  auto work = [] {
    for (int i = 0; i < 2000; ++i) {
      Tensor t = full({4096 + 64 * (i % 7)}, 1.0);  // >= 16 KiB: through the cache
      if (t.to_vector<float>()[4095] != 1.0f) throw std::runtime_error("corrupted block");
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  CHECK(allocator::stats().allocated_bytes == live_before);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
