// DistributedDataParallel between the ranks mpirun started: start-up broadcast and model check,
// buckets, mean gradients (float64 bitwise against the ranks' gradients summed here in rank order;
// with and without the communication thread), buckets launched during backward (the overlap
// mechanism), no_sync accumulation, unused parameters, buffer broadcast, the communication
// thread's errors, misuse.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <thread>

#include "nabla/core/cpu_load.h"
#include "nabla/core/parallel.h"
#include "nabla/nabla.h"
#include "nabla/nn/distributed/comm_thread.h"
#include "nabla/nn/distributed/data_parallel.h"
#include "nabla/nn/distributed/dist_detail.h"

namespace {

using namespace nabla;
namespace dist = nabla::dist;

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed, int64_t hidden = 8) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, hidden),
                                            std::make_shared<nn::Tanh>(),
                                            std::make_shared<nn::Linear>(hidden, 2));
  m->to(kFloat64);
  return m;
}

// Rank r's batch for micro-step k.
Tensor batch_of(int r, int k, DType dt = kFloat64) {
  Generator g(1000 + 17 * static_cast<uint64_t>(r) + static_cast<uint64_t>(k));
  return randn({3, 4}, g, kFloat64).to(dt);
}

Tensor loss_of(nn::Sequential& m, const Tensor& x) { return sum(mul(m(x), m(x))); }

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return a.to(kFloat64).to_vector<double>() == b.to(kFloat64).to_vector<double>();
}

// Each rank's local gradient sum over micro-steps `steps`, then the sum over ranks in rank order,
// divided by the world size: what DDP must produce.
std::vector<Tensor> expected_mean_grads(nn::Sequential& ref, const std::vector<int>& steps) {
  std::vector<Tensor> total;
  for (int r = 0; r < dist::world_size(); ++r) {
    for (Tensor& p : ref.parameters()) p.set_grad(Tensor());
    for (int k : steps) loss_of(ref, batch_of(r, k)).backward();
    std::vector<Tensor> params = ref.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad().clone();
      if (total.size() <= i)
        total.push_back(g);
      else
        total[i] = add(total[i], g);
    }
  }
  for (Tensor& t : total) t = div(t, double(dist::world_size()));
  return total;
}

}  // namespace

TEST_CASE("DistributedDataParallel: every rank starts from rank 0's parameters", "[ddp]") {
  auto model = make_mlp(100 + static_cast<uint64_t>(dist::rank()));  // different on each rank
  dist::DistributedDataParallel ddp(model);
  auto ref = make_mlp(100);  // rank 0's
  const auto mine = model->named_parameters();
  const auto want = ref->named_parameters();
  for (size_t i = 0; i < mine.size(); ++i) {
    INFO(mine[i].first);
    CHECK(bit_equal(mine[i].second, want[i].second));
    CHECK(mine[i].second.requires_grad());
  }
}

TEST_CASE("DistributedDataParallel: gradients are the mean over ranks, bitwise in float64",
          "[ddp]") {
  for (const bool comm_thread : {true, false})
    for (int64_t bucket_bytes : {int64_t{4} << 20, int64_t{64}}) {
      INFO("bucket_bytes " << bucket_bytes << ", comm_thread " << comm_thread);
      auto model = make_mlp(7);
      dist::DistributedDataParallel ddp(model,
                                        {.bucket_bytes = bucket_bytes, .comm_thread = comm_thread});
      REQUIRE(ddp.uses_comm_thread() == comm_thread);
      for (int step = 0; step < 2; ++step) {
        for (Tensor& p : model->parameters()) p.set_grad(Tensor());
        ddp.backward(loss_of(*model, batch_of(dist::rank(), step)));
        CHECK_FALSE(ddp.sync_pending());
        auto ref = make_mlp(7);
        const std::vector<Tensor> want = expected_mean_grads(*ref, {step});
        const std::vector<Tensor> params = model->parameters();
        for (size_t i = 0; i < params.size(); ++i) CHECK(bit_equal(params[i].grad(), want[i]));
      }
    }
}

TEST_CASE("DistributedDataParallel: buckets follow reverse registration order and the size cap",
          "[ddp]") {
  auto model = make_mlp(3);
  std::vector<std::string> reversed;
  for (const auto& [name, t] : model->named_parameters()) reversed.insert(reversed.begin(), name);
  {
    dist::DistributedDataParallel one(model);
    const auto buckets = one.buckets();
    REQUIRE(buckets.size() == 1);
    CHECK(buckets[0].parameters == reversed);
    CHECK(buckets[0].dtype == kFloat64);
    CHECK(buckets[0].bytes == model->num_parameters() * 8);
  }
  // 100 bytes: a bucket closes as soon as it holds >= 100 bytes (2.bias 16 B + 2.weight 128 B,
  // then 0.bias 64 B + 0.weight 256 B).
  dist::DistributedDataParallel small(model, {.bucket_bytes = 100});
  const auto buckets = small.buckets();
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].parameters == std::vector<std::string>{"2.bias", "2.weight"});
  CHECK(buckets[1].parameters == std::vector<std::string>{"0.bias", "0.weight"});
}

namespace {

// Linear-Tanh x3 then Linear, float32: with bucket_bytes = 1 every parameter is a bucket of its
// own (8), and the first layer's two gradients are the last backward produces.
std::shared_ptr<nn::Sequential> make_deep_mlp() {
  manual_seed(13);
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(8, 2));
}

bool in_first_layer(const std::string& name) { return name.rfind("0.", 0) == 0; }

// One forward: each parameter's gradient arrives in one piece, in layer order from the last.
Tensor one_pass_loss(nn::Sequential& m, int step) {
  const Tensor y = m(batch_of(dist::rank(), step, kFloat32));
  return sum(mul(y, y));
}

}  // namespace

// Issue 24's mechanism, independent of timing: while backward is still inside the first layer,
// the buckets of the later layers have already been handed to MPI (polling) or to the
// communication thread, which completes an all-reduce while backward waits in the hook. Buckets
// started only by finish() would show launched == 0 here.
TEST_CASE("DistributedDataParallel: buckets are launched during backward, before its last gradient",
          "[ddp]") {
  for (const bool comm_thread : {true, false}) {
    INFO("comm_thread " << comm_thread);
    auto model = make_deep_mlp();
    dist::DistributedDataParallel* ddp_seen_by_hook = nullptr;
    std::optional<dist::DistributedDataParallel::BucketProgress> seen;
    // Registered before DDP's own hooks, so it runs before DDP marks a first-layer gradient ready.
    auto observe = [&](const Tensor&) {
      if (seen || !ddp_seen_by_hook) return Tensor();
      seen = ddp_seen_by_hook->bucket_progress();
      if (comm_thread && seen->launched > 0) {
        // The thread finishes bucket 0 on its own while this (the backward's) thread waits.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (seen->completed == 0 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          seen = ddp_seen_by_hook->bucket_progress();
        }
      }
      return Tensor();
    };
    for (const auto& [name, t] : model->named_parameters())
      if (in_first_layer(name)) t.register_hook(observe);
    dist::DistributedDataParallel ddp(model, {.bucket_bytes = 1, .comm_thread = comm_thread});
    ddp_seen_by_hook = &ddp;
    REQUIRE(ddp.uses_comm_thread() == comm_thread);
    size_t later_layers = 0;  // the buckets before the first layer's
    for (const auto& bucket : ddp.buckets()) {
      REQUIRE(bucket.parameters.size() == 1);
      if (!in_first_layer(bucket.parameters.front())) ++later_layers;
    }
    REQUIRE(ddp.buckets().size() == 8);
    REQUIRE(later_layers == 6);
    for (int step = 0; step < 2; ++step) {
      seen.reset();
      ddp.backward(one_pass_loss(*model, step));
      REQUIRE(seen.has_value());
      CHECK(seen->launched == later_layers);
      if (comm_thread) {
        CHECK(seen->started >= 1);
        CHECK(seen->completed >= 1);
      } else {
        CHECK(seen->started == later_layers);  // the hooks called MPI themselves
      }
      CHECK(seen->completed <= seen->started);
      CHECK(seen->started <= seen->launched);
      const auto after = ddp.bucket_progress();  // finish() ran: the next backward starts at 0
      CHECK(after.launched + after.started + after.completed == 0);
    }
    // Control: inside no_sync nothing is launched.
    seen.reset();
    {
      auto scope = ddp.no_sync();
      one_pass_loss(*model, 2).backward();
    }
    REQUIRE(seen.has_value());
    CHECK(seen->launched == 0);
    ddp_seen_by_hook = nullptr;
  }
}

TEST_CASE("DistributedDataParallel: no_sync accumulates locally, the next backward averages",
          "[ddp]") {
  auto model = make_mlp(11);
  dist::DistributedDataParallel ddp(model, {.bucket_bytes = 64});
  {
    auto scope = ddp.no_sync();
    loss_of(*model, batch_of(dist::rank(), 0)).backward();
    CHECK_FALSE(ddp.sync_pending());
    ddp.finish();  // nothing to do
  }
  // Local only: the gradient is this rank's own.
  auto local = make_mlp(11);
  loss_of(*local, batch_of(dist::rank(), 0)).backward();
  CHECK(bit_equal(model->parameters()[0].grad(), local->parameters()[0].grad()));

  ddp.backward(loss_of(*model, batch_of(dist::rank(), 1)));
  auto ref = make_mlp(11);
  const std::vector<Tensor> want = expected_mean_grads(*ref, {0, 1});
  const std::vector<Tensor> params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) CHECK(bit_equal(params[i].grad(), want[i]));
}

TEST_CASE("DistributedDataParallel: a parameter without a gradient does not stall the buckets",
          "[ddp]") {
  auto model = make_mlp(5);
  Tensor unused = model->register_parameter("unused", zeros({3}, kFloat64));
  dist::DistributedDataParallel ddp(model, {.bucket_bytes = 64});
  ddp.backward(loss_of(*model, batch_of(dist::rank(), 0)));
  REQUIRE(unused.grad().defined());
  CHECK(unused.grad().to_vector<double>() == std::vector<double>(3, 0.0));
}

TEST_CASE("DistributedDataParallel: 16-bit parameters are averaged in float32", "[ddp]") {
  auto model = make_mlp(9);
  model->to(kBFloat16);
  dist::DistributedDataParallel ddp(model);
  REQUIRE(ddp.buckets().size() == 1);
  CHECK(ddp.buckets()[0].dtype == kBFloat16);
  CHECK(ddp.buckets()[0].bytes == model->num_parameters() * 4);  // travels as float32
  ddp.backward(loss_of(*model, batch_of(dist::rank(), 0, kBFloat16)));
  // Every rank ends with the same bfloat16 gradient, and it is the mean of the local ones.
  for (const Tensor& p : model->parameters()) {
    REQUIRE(p.grad().dtype() == kBFloat16);
    Tensor all = dist::all_gather(p.grad());
    for (int r = 1; r < dist::world_size(); ++r)
      CHECK(bit_equal(all.select(0, r), all.select(0, 0)));
  }
  auto ref = make_mlp(9);
  ref->to(kBFloat16);
  std::vector<Tensor> sum32;
  for (int r = 0; r < dist::world_size(); ++r) {
    for (Tensor& p : ref->parameters()) p.set_grad(Tensor());
    loss_of(*ref, batch_of(r, 0, kBFloat16)).backward();
    const auto ps = ref->parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor g = ps[i].grad().to(kFloat32);
      if (sum32.size() <= i)
        sum32.push_back(g);
      else
        sum32[i] = add(sum32[i], g);
    }
  }
  const auto ps = model->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    Tensor want = div(sum32[i], double(dist::world_size())).to(kBFloat16);
    CHECK(bit_equal(ps[i].grad(), want));
  }
}

TEST_CASE("DistributedDataParallel: a second backward before finish() is refused", "[ddp]") {
  auto model = make_mlp(2);
  dist::DistributedDataParallel ddp(model);
  loss_of(*model, batch_of(dist::rank(), 0)).backward();
  CHECK(ddp.sync_pending());
  CHECK_THROWS_WITH(loss_of(*model, batch_of(dist::rank(), 1)).backward(),
                    Catch::Contains("DistributedDataParallel") &&
                        Catch::Contains("second gradient before finish()"));
  ddp.finish();  // the first backward's round completes on every rank
  CHECK_FALSE(ddp.sync_pending());
}

TEST_CASE("DistributedDataParallel: different models on the ranks are named at start-up", "[ddp]") {
  if (dist::world_size() < 2) return;
  auto model = make_mlp(1, dist::rank() == 1 ? 9 : 8);
  CHECK_THROWS_WITH(dist::DistributedDataParallel(model),
                    Catch::Contains("different models") &&
                        Catch::Contains("parameter '0.weight' float64 (8, 4) on rank 0") &&
                        Catch::Contains("parameter '0.weight' float64 (9, 4) on rank 1"));
  // Start-up refusals leave the communicator usable.
  dist::barrier();
}

namespace {

// Linear -> BatchNorm1d: training forwards move the running statistics by each rank's own batch.
struct BatchNormNet : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::BatchNorm1d> bn;
  BatchNormNet() : Module("BatchNormNet") {
    manual_seed(21);
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(3));
  }
  Tensor operator()(const Tensor& x) const { return (*bn)((*fc)(x)); }
};

}  // namespace

TEST_CASE("DistributedDataParallel: finish() broadcasts rank 0's buffers (broadcast_buffers)",
          "[ddp]") {
  if (dist::world_size() < 2) return;
  for (const bool broadcast : {true, false}) {
    INFO("broadcast_buffers " << broadcast);
    auto model = std::make_shared<BatchNormNet>();
    dist::DistributedDataParallel ddp(model, {.broadcast_buffers = broadcast});
    const Tensor x = batch_of(dist::rank(), 0, kFloat32);
    ddp.backward(sum((*model)(x)));
    // Rank 0's statistics after its own forward, recomputed here on every rank.
    auto ref = std::make_shared<BatchNormNet>();
    (*ref)(batch_of(0, 0, kFloat32));
    const bool mean_is_rank0s = bit_equal(model->bn->running_mean(), ref->bn->running_mean());
    const bool var_is_rank0s = bit_equal(model->bn->running_var(), ref->bn->running_var());
    CHECK(bit_equal(model->bn->num_batches_tracked(), ref->bn->num_batches_tracked()));
    if (broadcast || dist::rank() == 0) {
      CHECK(mean_is_rank0s);
      CHECK(var_is_rank0s);
    } else {
      CHECK_FALSE(mean_is_rank0s);  // rank 1 keeps its own batch's statistics
      CHECK_FALSE(var_is_rank0s);
    }
  }
}

TEST_CASE("DistributedDataParallel: NABLA_DDP_COMM_THREAD overrides the option", "[ddp]") {
  auto model = make_mlp(4);
  ::setenv("NABLA_DDP_COMM_THREAD", "0", 1);
  CHECK_FALSE(dist::DistributedDataParallel(model).uses_comm_thread());
  ::setenv("NABLA_DDP_COMM_THREAD", "1", 1);
  CHECK(dist::DistributedDataParallel(model, {.comm_thread = false}).uses_comm_thread());
  ::setenv("NABLA_DDP_COMM_THREAD", "yes", 1);
  CHECK_THROWS_WITH(dist::DistributedDataParallel(model),
                    Catch::Contains("NABLA_DDP_COMM_THREAD='yes' is neither 0 nor 1"));
  ::unsetenv("NABLA_DDP_COMM_THREAD");
  // Unset: the thread only when this process has a core beyond its compute threads.
  CHECK(dist::comm_thread_by_default() == (cpu_load::allowed_cores() > num_threads()));
  CHECK(dist::DistributedDataParallel(model).uses_comm_thread() == dist::comm_thread_by_default());
  CHECK(dist::DistributedDataParallel(model, {.comm_thread = true}).uses_comm_thread());
  CHECK_FALSE(dist::DistributedDataParallel(model, {.comm_thread = false}).uses_comm_thread());
}

TEST_CASE("The communication thread runs collectives in order and carries errors to wait_all",
          "[ddp]") {
  dist::detail::CommThread comm;
  std::vector<Tensor> flats;
  for (int i = 0; i < 4; ++i) {
    flats.push_back(full({5}, double(dist::rank() + 1 + 10 * i), kFloat64));
    comm.submit([flat = flats.back()] {
      return dist::detail::all_reduce_flat_async(flat, dist::ReduceOp::Sum, false, "test bucket");
    });
  }
  comm.wait_all();
  const double ranks_sum = dist::world_size() * (dist::world_size() + 1) / 2.0;
  for (int i = 0; i < 4; ++i)
    CHECK(flats[static_cast<size_t>(i)].to_vector<double>() ==
          std::vector<double>(5, ranks_sum + 10.0 * i * dist::world_size()));
  // An exception on the thread (here from starting a collective) reaches the caller, not
  // std::terminate; the collectives after it still run, and the error stays.
  comm.submit([]() -> dist::Work { throw std::runtime_error("bucket refused"); });
  Tensor after = full({2}, 1.0, kFloat64);
  comm.submit([after] {
    return dist::detail::all_reduce_flat_async(after, dist::ReduceOp::Sum, false, "after");
  });
  CHECK_THROWS_WITH(comm.wait_all(), "bucket refused");
  CHECK(after.to_vector<double>() == std::vector<double>(2, double(dist::world_size())));
  CHECK_THROWS_WITH(comm.wait_all(), "bucket refused");
}
