// SmallVector (the storage of Shape): std::vector's behaviour both inline and after it spills to
// the heap, conversions to and from std::vector, copies and moves in both modes.
#include "nabla/core/small_vector.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using nabla::SmallVector;
using V = SmallVector<int64_t, 3>;

namespace {
std::vector<int64_t> as_vector(const V& v) { return {v.begin(), v.end()}; }
}  // namespace

TEST_CASE("SmallVector behaves like std::vector inline and on the heap", "[core]") {
  V v;
  CHECK(v.empty());
  for (int64_t i = 0; i < 3; ++i) v.push_back(i);
  CHECK(v.capacity() == 3);  // still inline
  v.push_back(3);            // spills
  CHECK(v.capacity() >= 4);
  CHECK(as_vector(v) == std::vector<int64_t>{0, 1, 2, 3});
  v.insert(v.begin() + 1, int64_t{9});
  CHECK(as_vector(v) == std::vector<int64_t>{0, 9, 1, 2, 3});
  v.insert(v.end(), {7, 8});
  v.erase(v.begin(), v.begin() + 2);
  CHECK(as_vector(v) == std::vector<int64_t>{1, 2, 3, 7, 8});
  v.insert(v.begin(), v.begin() + 3, v.end());  // a range from the vector itself
  CHECK(as_vector(v) == std::vector<int64_t>{7, 8, 1, 2, 3, 7, 8});
  v.resize(2);
  CHECK(v == V{7, 8});
  v.resize(4, 5);
  CHECK(v == V{7, 8, 5, 5});
  CHECK(v.back() == 5);
  v.pop_back();
  CHECK(v.size() == 3);
  CHECK_THROWS_AS(v.at(3), std::out_of_range);
  CHECK(V(2, 4) == V{4, 4});
  CHECK(V{1, 2} < V{1, 3});
  CHECK(V{} < V{0});
}

TEST_CASE("SmallVector copies, moves and converts in both modes", "[core]") {
  for (size_t n : {size_t{2}, size_t{5}}) {
    V a;
    for (size_t i = 0; i < n; ++i) a.push_back(static_cast<int64_t>(i * 10));
    const std::vector<int64_t> expected = as_vector(a);
    V copy = a;
    CHECK(copy == a);
    copy[0] = 99;
    CHECK(a[0] == 0);  // a copy owns its elements
    V moved = std::move(copy);
    CHECK(moved[0] == 99);
    CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    std::vector<int64_t> v = a;
    CHECK(v == expected);
    V back = v;
    CHECK(back == a);
    CHECK(back == expected);
    V assigned;
    assigned = a;
    assigned = std::move(back);
    CHECK(assigned == a);
    a.swap(moved);
    CHECK(moved == assigned);
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
