#include <unistd.h>

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
