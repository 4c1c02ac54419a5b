// The memory ledger (core/inspect/memory_ledger.h) and the allocator's byte counters under it:
// at three points of a training step every live byte is in exactly one category, the per-op
// timeline rises through the forward and falls through the backward, and the peak is exact.
#include <map>
#include <thread>

#include "nabla/core/inspect/memory_ledger.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

int64_t class_bytes(const Tensor& t) {
  return static_cast<int64_t>(allocator::size_class(t.storage()->nbytes()));
}

// A two-layer MLP written with ops, its Adam optimizer and a ledger that knows both.
struct Step {
  Generator gen{11};
  Tensor w1 = randn({16, 8}, gen).requires_grad_(), b1 = zeros({16}).requires_grad_();
  Tensor w2 = randn({4, 16}, gen).requires_grad_(), b2 = zeros({4}).requires_grad_();
  optim::Adam adam{{w1, b1, w2, b2}, optim::AdamOptions{}};
  inspect::MemoryLedger ledger;

  Step() {
    ledger.track_parameters(
        {{"fc1.weight", w1}, {"fc1.bias", b1}, {"fc2.weight", w2}, {"fc2.bias", b2}});
    ledger.track_optimizer_state([this] { return optimizer_state(); });
  }
  std::vector<Tensor> optimizer_state() const {
    std::vector<Tensor> state;
    for (size_t i = 0; i < adam.num_params(); ++i)
      for (const auto& [key, t] : adam.state(i)) state.push_back(t);
    return state;
  }
  // The loss of a fresh batch; the batch itself is only held by the graph.
  Tensor forward() {
    Tensor x = randn({32, 8}, gen), target = randn({32, 4}, gen);
    return mse_loss(linear(relu(linear(x, w1, b1)), w2, b2), target);
  }
  int64_t parameter_bytes() const {
    return class_bytes(w1) + class_bytes(b1) + class_bytes(w2) + class_bytes(b2);
  }
  int64_t state_bytes() const {
    int64_t total = 0;
    for (const Tensor& t : optimizer_state()) total += class_bytes(t);
    return total;
  }
};

}  // namespace

TEST_CASE("the allocator counts live and idle bytes of blocks of every size", "[core][inspect]") {
  for (int64_t numel : {int64_t{10}, int64_t{3000}, int64_t{200000}}) {
    const size_t before = allocator::live_bytes();
    const uint64_t allocated_before = allocator::thread_allocated_bytes();
    const size_t bytes = allocator::size_class(static_cast<size_t>(numel) * 4);
    {
      Tensor t = empty({numel});
      CHECK(allocator::live_bytes() == before + bytes);
      CHECK(allocator::thread_allocated_bytes() == allocated_before + bytes);
    }
    CHECK(allocator::live_bytes() == before);
  }
  // A block made on one thread and freed on another still balances.
  const size_t before = allocator::live_bytes();
  Tensor t;
  std::thread([&] { t = empty({100}); }).join();
  CHECK(allocator::live_bytes() == before + allocator::size_class(400));
  const size_t idle = allocator::idle_cache_bytes();
  t = Tensor();
  CHECK(allocator::live_bytes() == before);
  if (allocator::cache_limit() > 0)
    CHECK(allocator::idle_cache_bytes() == idle + allocator::size_class(400));
}

TEST_CASE("at three points of a training step the categories add up to the live bytes",
          "[core][inspect]") {
  Step s;
  {  // one step first, so that Adam's state and any lazily made buffer exist
    Tensor loss = s.forward();
    loss.backward();
    s.adam.step();
    s.adam.zero_grad();
  }
  const inspect::MemorySnapshot base = s.ledger.snapshot();
  CHECK(base.bytes.parameters == s.parameter_bytes());
  CHECK(base.bytes.gradients == 0);
  CHECK(base.bytes.optimizer_state == s.state_bytes());
  CHECK(base.bytes.optimizer_state > 0);
  CHECK(base.bytes.saved_activations == 0);
  CHECK(base.bytes.live() == static_cast<int64_t>(allocator::live_bytes()));

  // Nothing but the loss is held outside the graph: "other" may grow by its bytes only, and
  // every other live byte must be in a named category.
  Tensor loss = s.forward();
  const int64_t other = base.bytes.other + class_bytes(loss);
  auto check_point = [&](const inspect::MemorySnapshot& snap, int64_t gradients) {
    const inspect::MemoryCategories& c = snap.bytes;
    CHECK(c.parameters == s.parameter_bytes());
    CHECK(c.gradients == gradients);
    CHECK(c.optimizer_state == s.state_bytes());
    CHECK(c.other == other);
    CHECK(c.parameters + c.gradients + c.optimizer_state + c.saved_activations + other ==
          static_cast<int64_t>(allocator::live_bytes()));
    CHECK(c.live() == snap.allocator_live);
    CHECK(c.idle_cache == static_cast<int64_t>(allocator::idle_cache_bytes()));
  };

  const inspect::MemorySnapshot after_forward = s.ledger.snapshot({loss});
  check_point(after_forward, 0);
  // x (32 x 8) and the hidden layer (32 x 16) are saved for the weights' gradients.
  CHECK(after_forward.bytes.saved_activations >= 32 * 8 * 4 + 32 * 16 * 4);
  bool saw_linear = false;
  for (const auto& row : after_forward.saved_by_op) saw_linear |= row.op == "linear";
  CHECK(saw_linear);
  REQUIRE(after_forward.parameters_by_module.size() == 2);
  CHECK(after_forward.parameters_by_module[0].module == "fc1");
  CHECK(after_forward.parameters_by_module[0].parameters == class_bytes(s.w1) + class_bytes(s.b1));

  loss.backward();
  const inspect::MemorySnapshot after_backward = s.ledger.snapshot({loss});
  check_point(after_backward, s.parameter_bytes());
  CHECK(after_backward.bytes.saved_activations == 0);
  CHECK(after_backward.parameters_by_module[1].gradients == class_bytes(s.w2) + class_bytes(s.b2));

  s.adam.step();
  const inspect::MemorySnapshot after_step = s.ledger.snapshot({loss});
  check_point(after_step, s.parameter_bytes());
  CHECK(after_step.table().find("saved activations") != std::string::npos);
}

TEST_CASE("the per-op timeline rises through the forward and falls through the backward",
          "[core][inspect]") {
  Step s;
  s.ledger.start();
  CHECK_THROWS_AS(inspect::MemoryLedger().start(), Error);  // one recording at a time
  int64_t temporary_peak = 0;
  {
    Tensor loss = s.forward();
    {
      Tensor big = empty({1 << 20});  // 4 MiB, gone before the next op ends
      temporary_peak = static_cast<int64_t>(allocator::live_bytes());
    }
    loss.backward();
    s.adam.step();
  }
  const inspect::MemoryTimeline timeline = s.ledger.stop();
  CHECK_THROWS_AS(s.ledger.stop(), Error);

  std::vector<inspect::TimelinePoint> forward, backward, no_grad;
  for (const auto& p : timeline.points) {
    if (p.phase == inspect::Phase::Forward) forward.push_back(p);
    if (p.phase == inspect::Phase::Backward) backward.push_back(p);
    if (p.phase == inspect::Phase::NoGrad) no_grad.push_back(p);
  }
  // The outermost ops: linear, relu, linear, mse_loss (its inner ops are inside it).
  REQUIRE(forward.size() == 4);
  CHECK(forward[0].op == "linear");
  CHECK(forward[3].op == "mse_loss");
  for (size_t i = 1; i < forward.size(); ++i)
    CHECK(forward[i].bytes.saved_activations >= forward[i - 1].bytes.saved_activations);
  CHECK(forward.back().bytes.saved_activations > 0);
  CHECK(forward.back().bytes.live() > timeline.start_live_bytes);
  REQUIRE(!backward.empty());
  CHECK(backward[0].bytes.saved_activations <= forward.back().bytes.saved_activations);
  for (size_t i = 1; i < backward.size(); ++i)
    CHECK(backward[i].bytes.saved_activations <= backward[i - 1].bytes.saved_activations);
  CHECK(backward.back().bytes.saved_activations == 0);
  CHECK(backward.back().bytes.gradients == s.parameter_bytes());
  REQUIRE(no_grad.size() == 1);
  CHECK(no_grad[0].op == "optimizer.step");
  CHECK(no_grad[0].bytes.optimizer_state == s.state_bytes());
  for (size_t i = 0; i < timeline.points.size(); ++i) {
    CHECK(timeline.points[i].index == static_cast<int64_t>(i));
    CHECK(timeline.peak_live_bytes >= timeline.points[i].bytes.live());
  }
  CHECK(timeline.peak_live_bytes >= temporary_peak);  // seen although no point was taken then

  const std::string csv = timeline.csv();
  CHECK(csv.rfind("index,phase,op,parameters,gradients,optimizer_state,saved_activations,", 0) ==
        0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') ==
        static_cast<std::ptrdiff_t>(timeline.points.size() + 1));
  CHECK_THROWS_AS(timeline.write_csv("/nonexistent-dir/memory.csv"), IOError);
}

TEST_CASE("saved activations are split by the module whose forward recorded them",
          "[core][inspect]") {
  manual_seed(3);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 16),
                                                std::make_shared<nn::Tanh>(),
                                                std::make_shared<nn::Linear>(16, 4));
  inspect::MemoryLedger ledger;
  ledger.track_parameters(model->named_parameters());
  nn::RecordScopes scopes(*model);
  Tensor loss = sum((*model)(randn({32, 8})));
  const inspect::MemorySnapshot snap = ledger.snapshot({loss});
  std::map<std::string, int64_t> by_module;
  for (const auto& row : snap.saved_by_op) by_module[row.module] += row.bytes;
  // Linear "0" saves its input (32 x 8); Tanh "1" saves its output (32 x 16), which Linear "2"
  // saves too: the ledger counts a storage once, for whichever node claims it first.
  CHECK(by_module["0"] >= 32 * 8 * 4);
  CHECK(by_module["1"] + by_module["2"] >= 32 * 16 * 4);
  CHECK(by_module[""] == 0);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
