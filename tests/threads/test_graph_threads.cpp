// One graph, one thread at a time (core/graph_use.h): a tensor from another thread's graph may be
// recorded on freely, but running or inspecting nodes that another thread's backward is running
// is a clear AutogradError, never a race on saved tensors, hooks or .grad. Tagged [threads], so
// scripts/tsan.sh runs these under ThreadSanitizer too.
#include <catch2/catch.hpp>

#include <barrier>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/graph.h"
#include "nabla/core/inspect/memory_ledger.h"
#include "nabla/core/tensor.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/unary.h"

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

// What `f` threw as an AutogradError ("" if nothing; any other exception fails the test).
template <class F>
std::string autograd_error(F&& f) {
  try {
    f();
  } catch (const AutogradError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("threads: another thread's backward or inspection of a running graph is an AutogradError",
          "[threads]") {
  Tensor x = tensor({0.5, -1.0}, kFloat64).requires_grad_();
  Tensor h = add(x, 1.0);  // below both losses: its node and x's accumulator are shared
  Tensor e = exp(h);
  Tensor loss1 = sum(e);
  Tensor loss2 = sum(mul(h, 3.0));
  std::vector<std::string> errors;
  Tensor more;
  // The hook runs inside loss1's backward, on this thread, while that pass holds its nodes; the
  // other thread runs to its end meanwhile, so the order is fixed.
  e.register_hook([&](const Tensor&) {
    std::thread other([&] {
      errors.push_back(autograd_error([&] { loss2.backward(); }));
      errors.push_back(autograd_error([&] { autograd::grad({loss2}, {x}); }));
      errors.push_back(autograd_error([&] { inspect::export_graph({loss1}); }));
      errors.push_back(autograd_error([&] { inspect::GradientProbe probe({loss1}); }));
      errors.push_back(autograd_error([&] { inspect::MemoryLedger().snapshot({loss1, loss2}); }));
      more = sum(mul(h, 5.0));  // recording on top of the running graph is allowed
    });
    other.join();
    return Tensor();
  });
  loss1.backward();

  REQUIRE(errors.size() == 5);
  const char* who[] = {
      "backward: ", "backward: ", "export_graph: ", "GradientProbe: ", "MemoryLedger::snapshot: "};
  for (size_t i = 0; i < errors.size(); ++i) {
    INFO(i);
    CHECK_THAT(errors[i], Contains(who[i]) && Contains("is in use on another thread") &&
                              Contains("join that thread first"));
  }
  REQUIRE(more.defined());
  CHECK(more.requires_grad());
  // The refused backward added nothing (it would have added 3): x.grad is exp(x + 1).
  const std::vector<double> g1 = x.grad().to_vector<double>();
  CHECK(g1[0] == Approx(std::exp(1.5)));
  CHECK(g1[1] == Approx(1.0));

  // Once the pass is over, any thread may run the shared nodes again (one at a time).
  loss2.backward();
  size_t exported_nodes = 0;
  std::thread([&] { more.backward(); }).join();
  std::thread([&] { exported_nodes = inspect::export_graph({loss2}).nodes.size(); }).join();
  CHECK(exported_nodes == 4);  // sum, mul, add, x's accumulator
  const std::vector<double> g = x.grad().to_vector<double>();
  CHECK(g[0] == Approx(std::exp(1.5) + 8));
  CHECK(g[1] == Approx(1.0 + 8));
}

TEST_CASE("threads: recording with one leaf on several threads creates one accumulator",
          "[threads]") {
  Tensor w = tensor({1.0, 2.0, 3.0}).requires_grad_();
  constexpr int kThreads = 4, kGraphs = 50;
  std::vector<std::vector<Tensor>> recorded(kThreads);
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kGraphs; ++i) recorded[t].push_back(mul(w, 2.0));
    });
  for (std::thread& th : threads) th.join();
  // All graphs are alive, so all of them must hold w's one accumulator.
  const Node* accumulator = recorded[0][0].grad_fn()->next[0].fn.get();
  REQUIRE(accumulator != nullptr);
  int others = 0;
  for (const auto& graphs : recorded)
    for (const Tensor& y : graphs) others += y.grad_fn()->next[0].fn.get() != accumulator;
  CHECK(others == 0);
}

TEST_CASE("threads: a recording memory ledger sees the nodes of its own thread", "[threads]") {
  inspect::MemoryLedger ledger;
  ledger.start();
  Tensor a = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y;
  std::thread([&] { y = exp(a); }).join();  // ExpBackward saves its output
  const inspect::MemorySnapshot unseen = ledger.snapshot();
  const inspect::MemorySnapshot below_y = ledger.snapshot({y});
  ledger.stop();
  CHECK(unseen.bytes.saved_activations == 0);
  CHECK(below_y.bytes.saved_activations > 0);
  CHECK(unseen.bytes.live() == below_y.bytes.live());  // the bytes moved from "other"
}
