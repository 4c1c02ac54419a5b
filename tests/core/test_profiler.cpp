// The profiler (core/inspect/profiler.h): FLOPs against their formulas, nesting and self time,
// the summary, the Chrome trace JSON, the GEMM share of a training step, and its errors.
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "nabla/core/inspect/profiler.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using inspect::EventKind;

namespace {

// The events named `name`, in start order.
std::vector<inspect::ProfileEvent> named(const inspect::Profile& p, const std::string& name) {
  std::vector<inspect::ProfileEvent> out;
  for (const auto& e : p.events)
    if (e.name == name) out.push_back(e);
  return out;
}

// The one event named `name`.
inspect::ProfileEvent only(const inspect::Profile& p, const std::string& name) {
  const auto events = named(p, name);
  REQUIRE(events.size() == 1);
  return events[0];
}

// Holds the thread count for a test.
struct ThreadsGuard {
  int previous = num_threads();
  explicit ThreadsGuard(int n) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(previous); }
};

}  // namespace

TEST_CASE("the profiler reports the FLOPs formulas of matmul, linear and attention",
          "[core][inspect]") {
  Generator g(3);
  inspect::Profiler profiler;
  matmul(randn({3, 4, 5}, g), randn({5, 6}, g));  // batch 3 of (4 x 5) (5 x 6)
  matmul(randn({5}, g), randn({5, 6}, g));        // a row
  matmul(randn({4, 5}, g), randn({5}, g));        // a column
  linear(randn({2, 3, 8}, g), randn({16, 8}, g), randn({16}, g));
  scaled_dot_product_attention(randn({2, 4, 5, 8}, g), randn({2, 4, 7, 8}, g),
                               randn({2, 4, 7, 3}, g));
  layer_norm(randn({4, 10}, g), {10}, ones({10}), zeros({10}));
  layer_norm(randn({4, 10}, g), {10});
  const inspect::Profile p = profiler.stop();

  const auto mm = named(p, "matmul");
  REQUIRE(mm.size() == 3);
  CHECK(mm[0].flops == 2 * 3 * 4 * 6 * 5);
  CHECK(mm[1].flops == 2 * 6 * 5);
  CHECK(mm[2].flops == 2 * 4 * 5);
  CHECK(mm[0].input_shapes == std::vector<Shape>{{3, 4, 5}, {5, 6}});
  CHECK(only(p, "linear").flops == 2 * 6 * 8 * 16);
  CHECK(only(p, "scaled_dot_product_attention").flops == 2 * 8 * 5 * 7 * (8 + 3));
  const auto ln = named(p, "layer_norm");
  REQUIRE(ln.size() == 2);
  CHECK(ln[0].flops == 40 * 5);  // fvcore's estimate: 5 per element with an affine weight
  CHECK(ln[1].flops == 40 * 4);
  // Every GEMM the ops ran is an event of its own, nested in its op when on the same thread.
  for (const auto& e : named(p, "gemm")) {
    CHECK(e.kind == EventKind::Gemm);
    CHECK(e.flops == 2 * e.input_shapes[0][0] * e.input_shapes[0][1] * e.input_shapes[1][1]);
  }
  CHECK(p.total_flops() == 2 * 3 * 4 * 6 * 5 + 2 * 6 * 5 + 2 * 4 * 5 + 2 * 6 * 8 * 16 +
                               2 * 8 * 5 * 7 * 11 + 200 + 160);
}

TEST_CASE("backward nodes report their kernels' FLOPs", "[core][inspect]") {
  Generator g(4);
  Tensor a = randn({3, 4, 5}, g).requires_grad_(), b = randn({5, 6}, g);
  Tensor q = randn({2, 5, 8}, g).requires_grad_(), k = randn({2, 7, 8}, g).requires_grad_();
  Tensor v = randn({2, 7, 3}, g).requires_grad_();
  Tensor loss = add(sum(matmul(a, b)), sum(scaled_dot_product_attention(q, k, v)));
  inspect::Profiler profiler;
  loss.backward();
  const inspect::Profile p = profiler.stop();
  // Only a needs a gradient: one product as large as the forward's.
  CHECK(only(p, "MatmulBackward").flops == 2 * 3 * 4 * 6 * 5);
  CHECK(only(p, "MatmulBackward").kind == EventKind::Backward);
  // Five products per head: Q K^T again, dO V^T, W^T dO, dS K, dS^T Q.
  CHECK(only(p, "ScaledDotProductAttentionBackward").flops == 2 * 2 * 5 * 7 * (3 * 8 + 2 * 3));
  CHECK(named(p, "SumBackward").size() == 2);
}

TEST_CASE("nested ops: a composite's self time and FLOPs exclude its children's",
          "[core][inspect]") {
  ThreadsGuard one_thread(1);
  Generator g(5);
  Tensor x = randn({2, 3, 8, 8}, g), w = randn({4, 3, 3, 3}, g), bias = randn({4}, g);
  inspect::Profiler profiler;
  Tensor y = linear_activation_composite(randn({6, 8}, g), randn({16, 8}, g), Tensor(),
                                         LinearActivation::ReLU);
  Tensor c = conv2d_composite(x, w, bias, 1, 1);
  Tensor fused = conv2d(x, w, bias, 1, 1);
  const inspect::Profile p = profiler.stop();

  const auto composite = only(p, "linear_activation_composite");
  const auto lin = only(p, "linear");
  const auto relu_event = only(p, "relu");
  CHECK(lin.parent == composite.id);
  CHECK(relu_event.parent == composite.id);
  CHECK(composite.self_ns == composite.duration_ns - lin.duration_ns - relu_event.duration_ns);
  CHECK(composite.bytes_allocated >= lin.bytes_allocated + relu_event.bytes_allocated);
  // Every event's self time is its duration minus its children's (one thread here).
  std::map<uint64_t, int64_t> children_ns;
  for (const auto& e : p.events) children_ns[e.parent] += e.duration_ns;
  for (const auto& e : p.events) {
    CHECK(e.self_ns == e.duration_ns - children_ns[e.id]);
    CHECK(e.self_ns >= 0);
  }
  // conv2d_composite's FLOPs include its matmul's, which are not counted twice; the fused
  // conv2d states the same FLOPs itself (its per-sample GEMMs are gemm events).
  const auto conv = only(p, "conv2d_composite");
  const int64_t conv_flops = 2 * 2 * 4 * (8 * 8) * (3 * 3 * 3);
  CHECK(conv.flops == conv_flops);
  CHECK(only(p, "matmul").flops == conv_flops);
  CHECK(only(p, "matmul").flops_in_parent);
  CHECK(only(p, "matmul").parent == conv.id);
  CHECK(only(p, "conv2d").flops == conv_flops);
  CHECK_FALSE(lin.flops_in_parent);  // the composite itself states no FLOPs
  CHECK(p.total_flops() == lin.flops + 2 * conv_flops);
}

TEST_CASE("self times add up to at most the profiled wall time", "[core][inspect]") {
  Generator g(6);
  Tensor w1 = randn({64, 32}, g).requires_grad_(), w2 = randn({8, 64}, g).requires_grad_();
  Tensor x = randn({128, 32}, g);
  auto step = [&] {
    Tensor loss = mean(square(linear(gelu(linear(x, w1)), w2)));
    loss.backward();
  };
  for (int threads : {1, 2}) {
    ThreadsGuard guard(threads);
    inspect::Profiler profiler;
    step();
    const inspect::Profile p = profiler.stop();
    std::map<int, int64_t> self_by_thread;
    int64_t self_total = 0;
    for (const auto& e : p.events) {
      self_by_thread[e.thread] += e.self_ns;
      if (e.thread == p.caller_thread) self_total += e.self_ns;
      CHECK(e.start_ns >= 0);
      CHECK(e.start_ns + e.duration_ns <= p.wall_ns);
    }
    for (const auto& [thread, self] : self_by_thread) CHECK(self <= p.wall_ns);
    CHECK(self_total <= p.wall_ns);
    CHECK_FALSE(named(p, "LinearBackward").empty());
  }
}

TEST_CASE("the Chrome trace JSON has one complete event per recorded event", "[core][inspect]") {
  Generator g(7);
  Tensor w = randn({16, 8}, g).requires_grad_();
  inspect::Profiler profiler;
  sum(relu(linear(randn({4, 8}, g), w))).backward();
  const inspect::Profile p = profiler.stop();
  REQUIRE(!p.events.empty());

  const auto doc = nlohmann::json::parse(p.chrome_trace_json());
  REQUIRE(doc.contains("traceEvents"));
  std::map<std::string, int> json_names, event_names;
  size_t complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    ++json_names[e["name"].get<std::string>()];
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e.contains("ts"));
    CHECK(e.contains("tid"));
    CHECK(e["pid"] == 1);
  }
  for (const auto& e : p.events) ++event_names[e.name];
  CHECK(complete == p.events.size());
  CHECK(json_names == event_names);
  CHECK(event_names["linear"] == 1);
  CHECK(event_names["LinearBackward"] == 1);
  CHECK(event_names["AccumulateGrad"] == 1);

  const std::string path = "profiler_test_trace.json";
  p.write_chrome_trace(path);
  std::ifstream in(path);
  CHECK(nlohmann::json::parse(in)["traceEvents"].size() == doc["traceEvents"].size());
  std::remove(path.c_str());
  CHECK_THROWS_AS(p.write_chrome_trace("/nonexistent-dir/trace.json"), IOError);
}

TEST_CASE("the summary groups by op and by op and shape; GEMM's share of a step",
          "[core][inspect]") {
  Generator g(8);
  Tensor w = randn({32, 32}, g).requires_grad_();
  Tensor x1 = randn({64, 32}, g), x2 = randn({16, 32}, g);
  inspect::Profiler profiler;
  {
    NoGradGuard no_grad;  // forward ops are recorded without grad mode too
    matmul(x1, w);
  }
  Tensor loss = add(sum(matmul(x1, w)), sum(matmul(x2, w)));
  loss.backward();
  const inspect::Profile p = profiler.stop();

  const auto by_op = p.summary(inspect::GroupBy::Op);
  const auto row =
      std::find_if(by_op.begin(), by_op.end(), [](const auto& r) { return r.name == "matmul"; });
  REQUIRE(row != by_op.end());
  CHECK(row->count == 3);
  CHECK(row->flops == 2 * 2 * 64 * 32 * 32 + 2 * 16 * 32 * 32);
  for (size_t i = 1; i < by_op.size(); ++i) CHECK(by_op[i - 1].self_ns >= by_op[i].self_ns);
  int matmul_shape_rows = 0;
  for (const auto& r : p.summary(inspect::GroupBy::OpAndShape))
    if (r.name == "matmul") {
      ++matmul_shape_rows;
      CHECK((r.shapes == "[(64, 32), (32, 32)]" || r.shapes == "[(16, 32), (32, 32)]"));
    }
  CHECK(matmul_shape_rows == 2);

  CHECK(p.gemm_ns() > 0);
  CHECK(p.gemm_fraction() > 0);
  CHECK(p.gemm_fraction() <= 1);
  const std::string table = p.table(inspect::GroupBy::OpAndShape);
  CHECK(table.find("MatmulBackward") != std::string::npos);
  CHECK(table.find("GEMM (ops/gemm.cpp)") != std::string::npos);
}

TEST_CASE("the profiler records only while it runs, one at a time", "[core][inspect]") {
  Tensor x = ones({4});
  exp(x);  // before: not recorded
  inspect::Profiler profiler;
  CHECK_THROWS_AS(inspect::Profiler(), Error);
  exp(x);
  const inspect::Profile p = profiler.stop();
  CHECK_THROWS_AS(profiler.stop(), Error);
  exp(x);  // after: not recorded
  CHECK(p.events.size() == 1);
  CHECK(p.events[0].name == "exp");
  CHECK(p.events[0].dtype == kFloat32);
  CHECK(p.events[0].bytes_allocated >= static_cast<int64_t>(allocator::size_class(16)));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
