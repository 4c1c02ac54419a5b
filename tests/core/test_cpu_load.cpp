// The adaptive thread count: parsing the kernel's CPU counters, the load thresholds, and that the
// result of a parallel loop does not depend on how many threads run its parts.
#include <cblas.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "nabla/core/cpu_load.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("parse_proc_stat sums busy and total time of the chosen CPUs", "[parallel]") {
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::string text =
      "cpu  300 0 30 1000 10 0 0 0 0 0\n"
      "cpu0 100 0 10 500 5 0 0 0 0 0\n"
      "cpu1 200 5 20 500 5 1 2 3 0 0\n"
      "intr 12345\n";
  const auto both = cpu_load::parse_proc_stat(text, {});
  CHECK(both.busy * hz == Approx(110 + 231));
  CHECK(both.total * hz == Approx(615 + 736));
  const auto one = cpu_load::parse_proc_stat(text, {1});
  CHECK(one.busy * hz == Approx(231));  // user nice system irq softirq steal
  CHECK(one.total * hz == Approx(736));
  CHECK(cpu_load::parse_proc_stat("garbage\n", {}).total == 0);
}

TEST_CASE("parse_cgroup_quota reads cgroup v2 cpu.max", "[parallel]") {
  CHECK(cpu_load::parse_cgroup_quota("max 100000\n") == 0);
  CHECK(cpu_load::parse_cgroup_quota("150000 100000\n") == Approx(1.5));
  CHECK(cpu_load::parse_cgroup_quota("") == 0);
}

TEST_CASE("free_cores_for_load drops a core above 0.35 and frees it below 0.2", "[parallel]") {
  using cpu_load::free_cores_for_load;
  CHECK(free_cores_for_load(2, 0.0, 2) == 2);
  CHECK(free_cores_for_load(2, 0.3, 2) == 2);
  CHECK(free_cores_for_load(2, 0.4, 2) == 1);
  CHECK(free_cores_for_load(2, 1.0, 2) == 1);
  CHECK(free_cores_for_load(2, 2.0, 2) == 1);  // never fewer than one
  CHECK(free_cores_for_load(2, 0.3, 1) == 1);  // between the thresholds: stay
  CHECK(free_cores_for_load(2, 0.1, 1) == 2);
  CHECK(free_cores_for_load(8, 2.5, 8) == 5);
  CHECK(free_cores_for_load(8, 2.1, 5) == 6);
  CHECK(free_cores_for_load(1, 0.0, 1) == 1);
}

TEST_CASE("parallel_for splits by num_threads, not by the threads that run it", "[parallel]") {
  const int saved = num_threads();
  set_num_threads(2);
  std::vector<std::pair<int64_t, int64_t>> adaptive_chunks, fixed_chunks;
  auto record = [](std::vector<std::pair<int64_t, int64_t>>& out) {
    std::mutex m;
    parallel_for(1 << 20, 1, [&](int64_t b, int64_t e) {
      std::lock_guard lock(m);
      out.emplace_back(b, e);
    });
    std::sort(out.begin(), out.end());
  };
  record(adaptive_chunks);
  set_adaptive_threads(false);
  record(fixed_chunks);
  set_adaptive_threads(true);
  set_num_threads(saved);
  const std::vector<std::pair<int64_t, int64_t>> expected{{0, 1 << 19}, {1 << 19, 1 << 20}};
  CHECK(adaptive_chunks == expected);
  CHECK(fixed_chunks == expected);
}

TEST_CASE("a training-sized product gives the same bits on 1 or 2 active threads", "[parallel]") {
  const int saved = num_threads();
  set_num_threads(2);
  manual_seed(3);
  Tensor a = randn({512, 256}), b = randn({256, 384}), x = randn({300, 1000});
  set_adaptive_threads(false);  // both parts on their own thread
  Tensor c2 = matmul(a, b), s2 = softmax(x, -1), l2 = sum(x * x, {0});
  // One core busy in a child: the monitor must see it and run both parts on one thread.
  const pid_t child = fork();
  if (child == 0) {
    volatile uint64_t spins = 0;
    for (;;) spins = spins + 1;
  }
  REQUIRE(child > 0);
  set_adaptive_threads(true);
  int fewest = num_threads();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < deadline && fewest > 1) {
    std::this_thread::sleep_for(cpu_load::kSampleInterval / 5);
    fewest = std::min(fewest, active_threads());
  }
  Tensor c1 = matmul(a, b), s1 = softmax(x, -1), l1 = sum(x * x, {0});
  const int blas_threads = openblas_get_num_threads();  // a serial part must not thread BLAS
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  set_num_threads(saved);
  INFO(runtime_info());
  CHECK(fewest == 1);
  CHECK(blas_threads == 1);
  CHECK_CLOSE(c1, c2, 0.0, 0.0);  // bitwise: the parts are the same, only who runs them differs
  CHECK_CLOSE(s1, s2, 0.0, 0.0);
  CHECK_CLOSE(l1, l2, 0.0, 0.0);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
