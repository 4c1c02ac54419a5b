// live_objects(): the TensorImpl, Storage and Node counters go up with each object and come back
// when it goes. The end-to-end leak checks (a training step, ops that save their output, 500
// steps of an encoder) are in tests/nn/test_leaks_growth.cpp.
#include <thread>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("live_objects counts tensors, views, storages and nodes, and each goes back", "[core]") {
  const LiveObjects before = live_objects();
  {
    Tensor a = zeros({3, 4});
    LiveObjects now = live_objects();
    CHECK(now.tensor_impls == before.tensor_impls + 1);
    CHECK(now.storages == before.storages + 1);
    CHECK(now.nodes == before.nodes);

    Tensor view = a.transpose(0, 1);  // a new TensorImpl over the same storage
    Tensor handle = a;                // a handle, not an object
    now = live_objects();
    CHECK(now.tensor_impls == before.tensor_impls + 2);
    CHECK(now.storages == before.storages + 1);

    Tensor x = ones({2}).requires_grad_();
    Tensor y = x.unsqueeze(0);  // UnsqueezeBackward + x's AccumulateGrad
    now = live_objects();
    CHECK(now.nodes == before.nodes + 2);
    INFO(to_string(now));
    CHECK(to_string(now).find("nodes " + std::to_string(before.nodes + 2)) != std::string::npos);
  }
  CHECK(live_objects() == before);
}

TEST_CASE("live_objects: a copied TensorImpl is counted, a failed allocation is not", "[core]") {
  const LiveObjects before = live_objects();
  {
    Tensor a = zeros({2});
    TensorImpl copy = a.impl();  // SavedTensor::get() copies impls like this
    CHECK(live_objects().tensor_impls == before.tensor_impls + 2);
    copy = a.impl();  // assignment keeps the count
    CHECK(live_objects().tensor_impls == before.tensor_impls + 2);
  }
  CHECK(live_objects() == before);
  CHECK_THROWS_AS(zeros({int64_t{1} << 40}), OutOfMemoryError);
  CHECK(live_objects() == before);
}

TEST_CASE("live_objects: a graph freed on another thread comes back to 0 nodes", "[core]") {
  const LiveObjects before = live_objects();
  Tensor y;
  {
    Tensor x = ones({4}).requires_grad_();
    y = x.unsqueeze(0).squeeze(0).unsqueeze(1);
  }
  CHECK(live_objects().nodes == before.nodes + 4);
  std::thread([moved = std::move(y)]() mutable { moved = Tensor(); }).join();
  CHECK(live_objects() == before);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
