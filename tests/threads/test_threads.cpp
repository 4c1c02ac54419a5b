// Thread safety: everything in nabla that runs on more than one thread, exercised so that
// ThreadSanitizer (scripts/tsan.sh, the `tsan` preset) sees it: the DataLoader's prefetch thread,
// the allocator's per-thread free lists and shared cache, parallel kernels at 1 and 2 threads
// (forward and backward), grad mode on several threads, the load monitor read from several
// threads, and the default generator. In the ordinary suites the same tests check the results.
#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "nabla/core/allocator.h"
#include "nabla/core/autograd.h"
#include "nabla/core/cpu_load.h"
#include "nabla/core/generator.h"
#include "nabla/core/parallel.h"
#include "nabla/core/tensor.h"
#include "nabla/data/dataloader.h"
#include "nabla/ops/activation.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/attention.h"
#include "nabla/ops/dropout.h"
#include "nabla/ops/layer_norm.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/linear.h"
#include "nabla/ops/loss.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/softmax.h"
#include "nabla/ops/unary.h"

using namespace nabla;

namespace {

// Same dtype, shape and bytes.
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t elem = dtype_size(ca.dtype());
  return std::memcmp(static_cast<const char*>(ca.storage()->data()) + ca.offset() * elem,
                     static_cast<const char*>(cb.storage()->data()) + cb.offset() * elem,
                     static_cast<size_t>(ca.numel()) * elem) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < av.size(); ++i) worst = std::max(worst, std::abs(av[i] - bv[i]));
  return worst;
}

// Runs body(t) on n threads at once (released together by a barrier) and joins them.
template <class F>
void on_threads(int n, F body) {
  std::barrier start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  for (std::thread& th : threads) th.join();
}

// Restores the thread settings a test changes.
struct ThreadSettings {
  int threads = num_threads();
  bool adaptive = adaptive_threads();
  ~ThreadSettings() {
    set_num_threads(threads);
    set_adaptive_threads(adaptive);
  }
};

}  // namespace

TEST_CASE("threads: DataLoader prefetch builds batches while the main thread trains", "[threads]") {
  // Each batch is made with ops on the prefetch thread (its allocations are freed on the main
  // thread), while the main thread runs a forward and backward on the previous batch.
  using Loader = data::DataLoader<Tensor>;
  Generator g(1);
  const Tensor source = randn({64, 48}, g);
  auto make_batch = [&source](const std::vector<int64_t>& idx) {
    Tensor rows = empty({static_cast<int64_t>(idx.size()), 48});
    for (size_t i = 0; i < idx.size(); ++i)
      rows.select(0, static_cast<int64_t>(i)).copy_(source.select(0, idx[i]));
    return softmax(mul(rows, 2.0), -1);
  };
  const Tensor w = randn({48, 8}, g).requires_grad_();
  auto run = [&](bool prefetch) {
    Loader::Options opts;
    opts.batch_size = 5;
    opts.seed = 3;
    opts.prefetch = prefetch;
    Loader loader(64, opts, make_batch);
    std::vector<Tensor> seen;
    for (int epoch = 0; epoch < 2; ++epoch, loader.next_epoch())
      while (auto batch = loader.next()) {
        Tensor loss = sum(tanh(matmul(*batch, w)));
        loss.backward();
        seen.push_back(*batch);
      }
    loader.restore({1, 4});  // a pending prefetch is dropped, a new one started
    seen.push_back(*loader.next());
    return seen;  // the loader is destroyed with a prefetch in flight
  };
  const std::vector<Tensor> with = run(true), without = run(false);
  REQUIRE(with.size() == without.size());
  for (size_t i = 0; i < with.size(); ++i) CHECK(bitwise_equal(with[i], without[i]));
}

TEST_CASE("threads: allocator free lists and cache under concurrent use", "[threads]") {
  // Small blocks (per-thread lists) and large ones (the shared cache), some freed by another
  // thread than the one that allocated them, with stats() and empty_cache() called meanwhile.
  allocator::empty_cache();
  const size_t live_before = allocator::stats().allocated_bytes;
  std::mutex handoff_mutex;
  std::vector<Tensor> handoff;
  std::atomic<int> corrupted{0};
  on_threads(4, [&](int t) {
    for (int i = 0; i < 1500; ++i) {
      const int64_t n = (i % 3 == 0) ? 5000 + 64 * (i % 5) : 16 + 40 * (i % 11);
      Tensor x = full({n}, static_cast<double>(t));
      if (x.to_vector<float>()[static_cast<size_t>(n - 1)] != static_cast<float>(t)) ++corrupted;
      if (i % 4 == 0) {
        std::lock_guard lock(handoff_mutex);
        handoff.push_back(x);  // freed later by whichever thread clears the list
        if (handoff.size() > 16) handoff.clear();
      }
      if (t == 0 && i % 100 == 0) allocator::empty_cache();
      if (t == 1 && i % 50 == 0) (void)allocator::stats();
    }
  });
  handoff.clear();
  CHECK(corrupted == 0);
  CHECK(allocator::stats().allocated_bytes == live_before);
}

TEST_CASE("threads: kernels forward and backward at 1 and 2 threads", "[threads]") {
  ThreadSettings restore;
  set_adaptive_threads(false);  // two parts run on two threads even on a busy machine
  Generator g(7);
  const int64_t rows = 2 * parallel_grain() / 128 + 5;  // above the grain
  const Tensor x0 = randn({rows, 128}, g), b0 = randn({128}, g), w0 = randn({128, 128}, g);
  const Tensor target = randint(0, 128, {rows}, g);
  const Tensor q = randn({16, 40, 16}, g), k = randn({16, 50, 16}, g), v = randn({16, 50, 8}, g);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor x = x0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    Tensor w = w0.clone().requires_grad_();
    Generator dg(11);
    Tensor h = layer_norm(gelu(add(x, b)), {128}, b, b);
    Tensor logits = linear(dropout(h, 0.2, true, dg), w);
    Tensor loss = add(cross_entropy(logits, target), mean(softmax(exp(mul(h, 0.1)), -1)));
    loss.backward();
    Tensor att = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.1, .generator = &dg});
    return std::vector<Tensor>{h,        logits,           sum(x.t().contiguous(), {1}),
                               att,      x.grad(),         b.grad(),
                               w.grad(), randn({rows}, dg)};
  };
  const std::vector<Tensor> one = run(1), two = run(2);
  // GEMMs block differently per thread count (rounding); everything else splits so that no sum
  // depends on it, and anything computed before the first GEMM is bitwise equal.
  CHECK(bitwise_equal(one[0], two[0]));
  CHECK(bitwise_equal(one[2], two[2]));
  CHECK(bitwise_equal(one[3], two[3]));
  CHECK(bitwise_equal(one[7], two[7]));
  for (size_t i : {size_t{1}, size_t{4}, size_t{5}, size_t{6}}) {
    INFO("output " << i);
    CHECK(max_abs_diff(one[i], two[i]) < 1e-4);
  }
}

TEST_CASE("threads: kernels on several user threads at once", "[threads]") {
  // Two user threads each entering OpenMP regions (as the prefetch thread and the training
  // thread do), on private data: each must get the single-threaded answer.
  ThreadSettings restore;
  set_adaptive_threads(false);
  set_num_threads(2);
  Generator g(5);
  const Tensor x = randn({parallel_grain() / 64 + 3, 256}, g);
  const Tensor expected = softmax(x, -1), expected_sum = sum(x, {0});
  std::atomic<int> wrong{0};
  on_threads(3, [&](int) {
    for (int i = 0; i < 8; ++i)
      if (!bitwise_equal(softmax(x, -1), expected) || !bitwise_equal(sum(x, {0}), expected_sum))
        ++wrong;
  });
  CHECK(wrong == 0);
}

TEST_CASE("threads: grad mode is per thread", "[threads]") {
  // Half the threads hold NoGradGuard while the others record and run backward.
  std::atomic<int> wrong{0};
  on_threads(4, [&](int t) {
    for (int i = 0; i < 200; ++i) {
      Tensor a = full({3}, 2.0).requires_grad_();
      if (t % 2 == 0) {
        NoGradGuard no_grad;
        Tensor y = mul(a, a);
        if (y.requires_grad() || y.grad_fn()) ++wrong;
        {
          EnableGradGuard enable;
          if (!mul(a, a).grad_fn()) ++wrong;
        }
        if (GradMode::enabled()) ++wrong;
      } else {
        Tensor y = sum(mul(a, a));
        if (!y.grad_fn()) ++wrong;
        y.backward();
        if (a.grad().to_vector<float>() != std::vector<float>{4, 4, 4}) ++wrong;
      }
    }
    if (!GradMode::enabled()) ++wrong;  // every guard restored its own thread's mode
  });
  CHECK(wrong == 0);
}

TEST_CASE("threads: the load monitor is read and sampled from several threads", "[threads]") {
  // available_threads() samples /proc/stat on whichever thread finds the interval over; four
  // threads call it (and the readers) until the monitor has sampled at least twice.
  ThreadSettings restore;
  set_adaptive_threads(true);
  std::atomic<int> out_of_range{0};
  const auto until = std::chrono::steady_clock::now() + 3 * cpu_load::kSampleInterval;
  on_threads(4, [&](int t) {
    while (std::chrono::steady_clock::now() < until) {
      const int n = t == 0 ? active_threads() : cpu_load::available_threads(2);
      if (n < 1 || n > std::max(2, num_threads())) ++out_of_range;
      const cpu_load::Reading r = cpu_load::last_reading();
      if (r.free_cores < 1 || r.free_cores > r.allowed) ++out_of_range;
      if (t == 3) (void)cpu_load::describe();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  CHECK(out_of_range == 0);
  CHECK(cpu_load::last_reading().measured);
}

TEST_CASE("threads: the default generator hands each draw its own counters", "[threads]") {
  // randn() without a generator from several threads: the draws reserve disjoint counter ranges,
  // so together they advance the generator by exactly the total drawn.
  manual_seed(17);
  const uint64_t before = default_generator().offset();
  constexpr int kThreads = 4, kDraws = 300;
  on_threads(kThreads, [&](int) {
    for (int i = 0; i < kDraws; ++i) (void)randn({8});
  });
  const uint64_t per_draw = [] {
    Generator probe(0);
    (void)randn({8}, probe);
    return probe.offset();
  }();
  CHECK(default_generator().offset() - before == kThreads * kDraws * per_draw);
}
