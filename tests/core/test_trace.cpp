// The backward trace (core/inspect/trace.h): nodes in the engine's order, the worked example's
// gradients against the hand derivation in docs/autograd.md, saved bytes read and freed, the
// table and JSON lines, and its errors.
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "nabla/core/inspect/trace.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// docs/autograd.md section 8: out = softmax(Q K^T / sqrt(2)) V, loss = sum(out).
struct WorkedExample {
  Tensor Q = tensor({{1, 0}, {0, 1}}, kFloat64).requires_grad_();
  Tensor K = tensor({{1, 2}, {3, 4}}, kFloat64).requires_grad_();
  Tensor V = tensor({{5, 6}, {7, 8}}, kFloat64).requires_grad_();
  Tensor Kt, scores, scaled, weights, out, loss;
  WorkedExample() {
    Kt = K.t();
    scores = matmul(Q, Kt);
    scaled = div(scores, std::sqrt(2.0));
    weights = softmax(scaled, -1);
    out = matmul(weights, V);
    loss = sum(out);
  }
};

Tensor matrix(double a, double b, double c, double d) { return tensor({{a, b}, {c, d}}, kFloat64); }

// Registers a hook that appends the sequence number of the node `t`'s gradient runs through.
void record_order(const Tensor& t, std::vector<uint64_t>& order) {
  const uint64_t seq = gradient_edge(t)->sequence_nr();
  t.register_hook([seq, &order](const Tensor&) {
    order.push_back(seq);
    return Tensor();
  });
}

std::vector<uint64_t> traced_order(const inspect::Trace& trace) {
  std::vector<uint64_t> seqs;
  for (const auto& r : trace.nodes) seqs.push_back(r.sequence_nr);
  return seqs;
}

}  // namespace

TEST_CASE("the trace lists the nodes in the engine's execution order", "[core][inspect]") {
  // The hooks of each tensor run when the engine runs that tensor's node (for a leaf, inside its
  // AccumulateGrad): an order observed without the trace.
  Tensor x = tensor({0.5, -1.0, 2.0}, kFloat64).requires_grad_();
  Tensor w = tensor({1.5, 0.25, -0.5}, kFloat64).requires_grad_();
  Tensor a = mul(x, w);
  Tensor b = exp(a);
  Tensor c = mul(a, a);
  Tensor d = add(b, tanh(c));
  Tensor e = sum(mul(d, x));
  std::vector<uint64_t> order;
  for (const Tensor& t : {x, w, a, b, c, d, e}) record_order(t, order);

  inspect::BackwardTrace tracer;
  e.backward();
  const inspect::Trace trace = tracer.stop();
  REQUIRE(order.size() == 7);
  // Every node runs once; tanh's node carries no hook, so compare on the hooked ones.
  std::vector<uint64_t> hooked;
  for (uint64_t seq : traced_order(trace))
    if (std::find(order.begin(), order.end(), seq) != order.end()) hooked.push_back(seq);
  CHECK(hooked == order);
  CHECK(trace.nodes.size() == 9);  // 7 ops' nodes and the accumulators of x and w
  for (size_t i = 0; i < trace.nodes.size(); ++i) CHECK(trace.nodes[i].index == i);
}

TEST_CASE("the worked example's traced gradients equal the hand derivation", "[core][inspect]") {
  WorkedExample ex;
  std::vector<uint64_t> order;
  for (const Tensor& t :
       {ex.Q, ex.K, ex.V, ex.Kt, ex.scores, ex.scaled, ex.weights, ex.out, ex.loss})
    record_order(t, order);
  inspect::BackwardTrace tracer({.keep_gradients = true});
  ex.loss.backward();
  const inspect::Trace trace = tracer.stop();

  // Every node of this graph carries a hook, so the orders must match exactly.
  CHECK(traced_order(trace) == order);
  std::vector<std::string> names;
  for (const auto& r : trace.nodes) names.push_back(r.node);
  CHECK(names == std::vector<std::string>{"SumBackward", "MatmulBackward", "AccumulateGrad",
                                          "SoftmaxBackward", "DivBackward", "MatmulBackward",
                                          "AccumulateGrad", "PermuteBackward", "AccumulateGrad"});
  REQUIRE(trace.nodes.size() == 9);

  // docs/autograd.md section 8: a = 1 / (1 + e^sqrt(2)), b = 1 - a (each row's weights),
  // dA = [[11, 15], [11, 15]], dS = 4ab [[-1, 1], [-1, 1]], c = 4ab / sqrt(2).
  const double a = 1.0 / (1.0 + std::exp(std::sqrt(2.0))), b = 1.0 - a;
  const double s = 4 * a * b, c = s / std::sqrt(2.0);
  const Tensor ones2 = ones({2, 2}, kFloat64);
  const Tensor dV = matrix(2 * a, 2 * a, 2 * b, 2 * b), dA = matrix(11, 15, 11, 15);
  const Tensor dS = matrix(-s, s, -s, s), dM = matrix(-c, c, -c, c);
  const Tensor dQ = matrix(2 * c, 2 * c, 2 * c, 2 * c), dK = matrix(-c, -c, c, c);

  const auto& n = trace.nodes;
  CHECK(n[0].grad_shape == Shape{});
  CHECK(n[0].grad.item<double>() == 1.0);
  CHECK_CLOSE(n[0].sent[0].value, ones2, 1e-12, 0);
  CHECK(n[0].sent[0].norm == Approx(2.0));
  CHECK_CLOSE(n[1].grad, ones2, 1e-12, 0);  // MatmulBackward of weights @ V
  CHECK_CLOSE(n[1].sent[0].value, dA, 1e-12, 1e-12);
  CHECK_CLOSE(n[1].sent[1].value, dV, 1e-12, 1e-12);
  CHECK(n[1].sent[0].to == "SoftmaxBackward");
  CHECK(n[1].sent[1].to == "AccumulateGrad");
  CHECK(n[1].sent[0].norm == Approx(std::sqrt(2 * (121.0 + 225.0))));
  CHECK_CLOSE(n[2].grad, dV, 1e-12, 1e-12);  // V's accumulator
  CHECK_CLOSE(n[3].grad, dA, 1e-12, 1e-12);  // softmax
  CHECK_CLOSE(n[3].sent[0].value, dS, 1e-12, 1e-9);
  CHECK_CLOSE(n[4].grad, dS, 1e-12, 1e-9);  // the division by sqrt(2)
  CHECK_CLOSE(n[4].sent[0].value, dM, 1e-12, 1e-9);
  CHECK_FALSE(n[4].sent[1].sent);  // the scalar sqrt(2) needs no gradient
  CHECK(n[4].sent[1].to.empty());
  CHECK_CLOSE(n[5].grad, dM, 1e-12, 1e-9);  // Q @ K^T
  CHECK_CLOSE(n[5].sent[0].value, dQ, 1e-12, 1e-9);
  CHECK_CLOSE(n[5].sent[1].value, dM, 1e-12, 1e-9);  // d(K^T) = Q^T dM = dM
  CHECK_CLOSE(n[6].grad, dQ, 1e-12, 1e-9);           // Q's accumulator
  CHECK_CLOSE(n[7].sent[0].value, dK, 1e-12, 1e-9);  // the transpose
  CHECK_CLOSE(n[8].grad, dK, 1e-12, 1e-9);           // K's accumulator
  CHECK(n[8].grad_norm == Approx(2 * c));
  // And the leaves received exactly those.
  CHECK_CLOSE(ex.Q.grad(), dQ, 1e-12, 1e-9);
  CHECK_CLOSE(ex.K.grad(), dK, 1e-12, 1e-9);
  CHECK_CLOSE(ex.V.grad(), dV, 1e-12, 1e-12);
}

TEST_CASE("the trace counts the saved bytes a node reads and gives back", "[core][inspect]") {
  Tensor x = ones({32, 32}, kFloat64).requires_grad_();
  const int64_t h_bytes = 32 * 32 * 8;
  for (bool retain : {false, true}) {
    Tensor loss;
    {
      Tensor h = add(x, x);   // no saved tensors
      loss = sum(mul(h, h));  // MulBackward saves h twice; nobody else holds it
    }
    inspect::BackwardTrace tracer;
    loss.backward(Tensor(), retain);
    const inspect::Trace trace = tracer.stop();
    REQUIRE(trace.nodes.size() == 4);  // sum, mul, add, x's accumulator
    const inspect::TraceRecord& mul_node = trace.nodes[1];
    REQUIRE(mul_node.node == "MulBackward");
    CHECK(mul_node.saved_read_bytes == h_bytes);  // one tensor, read through two fields
    CHECK(mul_node.saved_freed_bytes ==
          (retain ? 0 : static_cast<int64_t>(allocator::size_class(h_bytes))));
    CHECK(trace.nodes[2].saved_read_bytes == 0);
    CHECK(mul_node.duration_ns >= 0);
    x.set_grad(Tensor());
  }
}

TEST_CASE("the trace prints an aligned table and JSON lines", "[core][inspect]") {
  WorkedExample ex;
  inspect::BackwardTrace tracer;
  ex.loss.backward();
  const inspect::Trace trace = tracer.stop();

  const std::string table = trace.table();
  std::istringstream rows(table);
  std::vector<std::string> lines;
  for (std::string line; std::getline(rows, line);) lines.push_back(line);
  REQUIRE(lines.size() == trace.nodes.size() + 1);
  CHECK(lines[0].find("received (shape, norm)") != std::string::npos);
  for (size_t i = 1; i < lines.size(); ++i) {
    CHECK(lines[i].size() == lines[1].size());  // aligned columns
    CHECK(lines[i].find(trace.nodes[i - 1].node) != std::string::npos);
  }

  std::istringstream jsonl(trace.json_lines());
  size_t count = 0;
  for (std::string line; std::getline(jsonl, line); ++count) {
    const auto j = nlohmann::json::parse(line);
    const inspect::TraceRecord& r = trace.nodes[count];
    CHECK(j["index"] == count);
    CHECK(j["node"] == r.node);
    CHECK(j["op"] == r.op);
    CHECK(j["grad_norm"].get<double>() == Approx(r.grad_norm));
    CHECK(j["sent"].size() == r.sent.size());
    CHECK(j["saved_freed_bytes"] == r.saved_freed_bytes);
  }
  CHECK(count == trace.nodes.size());
  CHECK(trace.nodes[0].op == "sum");
}

TEST_CASE("the trace records only its own thread and refuses bad use", "[core][inspect]") {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  inspect::BackwardTrace tracer;
  CHECK_THROWS_AS(inspect::BackwardTrace(), Error);  // one at a time
  std::thread other([&] { sum(mul(x, x)).backward(); });
  other.join();
  sum(exp(x)).backward();
  const inspect::Trace trace = tracer.stop();
  CHECK_THROWS_AS(tracer.stop(), Error);
  REQUIRE(trace.nodes.size() == 3);  // sum, exp, x's accumulator: not the other thread's
  CHECK(trace.nodes[1].node == "ExpBackward");
  try {
    trace.write_json_lines("/nonexistent-dir/trace.jsonl");
    FAIL("expected an IOError");
  } catch (const IOError& e) {
    CHECK(std::string(e.what()).find("/nonexistent-dir/trace.jsonl") != std::string::npos);
  }
}

TEST_CASE("a view that adds into its input's buffer is traced as such", "[core][inspect]") {
  // The second slice of h finds h's gradient buffer already made by the first and adds its part
  // in place (Node::backward_into): there is no separate gradient to measure.
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64).requires_grad_();
  Tensor h = mul(x, 2.0);
  Tensor loss = add(sum(h.slice(0, 0, 2)), sum(mul(h.slice(0, 2, 4), 3.0)));
  inspect::BackwardTrace tracer;
  loss.backward();
  const inspect::Trace trace = tracer.stop();
  int into_buffer = 0, measured = 0;
  for (const auto& r : trace.nodes) {
    if (r.node != "SliceBackward") continue;
    REQUIRE(r.sent.size() == 1);
    if (r.into_buffer) {
      ++into_buffer;
      CHECK_FALSE(r.sent[0].sent);
    } else {
      ++measured;
      CHECK(r.sent[0].sent);
      CHECK(r.sent[0].shape == Shape{4});  // the whole of h: the slice's zero-padded gradient
    }
  }
  CHECK(into_buffer == 1);
  CHECK(measured == 1);
  CHECK(trace.json_lines().find("\"norm\":null") != std::string::npos);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 2, 6, 6});
}

}  // namespace NABLA_UNITY_ID
}  // namespace
