// The pieces that make recording an op cheap (docs/perf.md, "Recording an op"): InlineVector
// (a node's per-input fields), the per-thread object pool (nodes and tensor headers) and the
// per-thread live-object counters. Each must behave exactly like what it replaced.
#include <memory>
#include <thread>
#include <vector>

#include "nabla/core/inline_vector.h"
#include "nabla/core/object_pool.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("InlineVector: inline up to N, then on the heap, every element destroyed once",
          "[core]") {
  auto token = std::make_shared<int>(7);  // use_count counts the live copies
  {
    InlineVector<std::shared_ptr<int>, 3> v;
    CHECK(v.empty());
    for (int i = 0; i < 3; ++i) v.push_back(token);
    CHECK(v.size() == 3);
    CHECK(token.use_count() == 4);
    v.emplace_back(token);  // spills: the three inline copies move, none is lost or duplicated
    v.push_back(std::make_shared<int>(9));
    CHECK(v.size() == 5);
    CHECK(token.use_count() == 5);
    CHECK(*v[4] == 9);
    CHECK(*v.back() == 9);
    int sum = 0;
    for (const auto& p : v) sum += *p;
    CHECK(sum == 4 * 7 + 9);
    const std::vector<std::shared_ptr<int>> copy = v.to_vector();
    CHECK(copy.size() == 5);
    CHECK(token.use_count() == 9);
    v.clear();
    CHECK(v.empty());
    CHECK(token.use_count() == 5);  // the copies in `copy`
    v.push_back(token);
    CHECK(v.size() == 1);
  }
  CHECK(token.use_count() == 1);
  {
    InlineVector<Shape, 2> shapes;
    shapes.reserve(4);  // spills before anything is stored
    shapes.push_back({2, 3});
    shapes.push_back({4});
    shapes.push_back({});
    CHECK(shapes.size() == 3);
    CHECK(shapes[0] == Shape{2, 3});
    CHECK(shapes[2].empty());
  }
}

TEST_CASE("object pool: a freed block serves the next request of its class, up to a cap",
          "[core]") {
  // Earlier tests in this process may have filled the pool up to its cap: start empty.
  detail::release_pooled();
  CHECK(detail::pooled_bytes() == 0);
  void* a = detail::pool_allocate(200);
  detail::pool_deallocate(a, 200);
#if !defined(__SANITIZE_ADDRESS__)  // under ASan every block goes to the system
  const size_t pooled = detail::pooled_bytes();
  CHECK(pooled >= 256);
  void* b = detail::pool_allocate(250);  // the same 256-byte class
  CHECK(b == a);
  CHECK(detail::pooled_bytes() == pooled - 256);
  detail::pool_deallocate(b, 250);
  // Past the cap, freed blocks go back to the system.
  std::vector<void*> blocks;
  for (size_t i = 0; i < 2 * detail::kMaxPooledBytes / 2048; ++i)
    blocks.push_back(detail::pool_allocate(2048));
  for (void* p : blocks) detail::pool_deallocate(p, 2048);
  CHECK(detail::pooled_bytes() <= detail::kMaxPooledBytes);
  CHECK(detail::pooled_bytes() >= detail::kMaxPooledBytes - 2048);
#endif
  // Too large for a class: straight to the system, whatever the build.
  void* big = detail::pool_allocate(100000);
  detail::pool_deallocate(big, 100000);
  // A recorded op's node and output header come from the pool and go back to it.
  Tensor x = ones({4}).requires_grad_();
  { Tensor y = add(x, x); }
  Tensor z = add(x, x);  // reuses the blocks
  CHECK(z.grad_fn() != nullptr);
}

TEST_CASE("live_objects: objects a thread made and left behind stay counted after it exits",
          "[core]") {
  const LiveObjects before = live_objects();
  Tensor kept;
  std::thread([&kept] {
    Tensor x = ones({3}).requires_grad_();
    kept = mul(x, 2.0);  // a node, its leaf's accumulator, tensors and storages
  }).join();
  LiveObjects now = live_objects();
  CHECK(now.nodes == before.nodes + 2);
  CHECK(now.tensor_impls > before.tensor_impls);
  CHECK(now.storages > before.storages);
  kept = Tensor();  // freed here, counted against this thread
  CHECK(live_objects() == before);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
