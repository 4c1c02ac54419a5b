// Deterministic mode (core/parallel.h, docs/reliability.md "Determinism"): a training step of a
// small encoder gives bitwise the same losses, gradients and parameters on 1 and on 2 threads.
#include <cstring>

#include "tests/helpers.h"
#include "tests/small_encoder_trainer.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// Holds deterministic mode, a thread count and fixed (not load-following) threads for a scope,
// so that two threads really run the parts even on a busy machine.
class ThreadSetup {
 public:
  ThreadSetup(bool deterministic_on, int threads)
      : det_(deterministic()), threads_(num_threads()), adaptive_(adaptive_threads()) {
    set_deterministic(deterministic_on);
    set_num_threads(threads);
    set_adaptive_threads(false);
  }
  ~ThreadSetup() {
    set_deterministic(det_);
    set_num_threads(threads_);
    set_adaptive_threads(adaptive_);
  }
  ThreadSetup(const ThreadSetup&) = delete;
  ThreadSetup& operator=(const ThreadSetup&) = delete;

 private:
  bool det_;
  int threads_;
  bool adaptive_;
};

struct RunResult {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads, params;
};

// Big enough that the GEMMs split and the loops run in parallel parts (above parallel_grain()):
// 16 x 32 tokens make 512-row products. Width 40 and feed-forward 80 because with OpenBLAS
// 0.3.21's SkylakeX kernels the input gradient of linear1 (512 x 40 x 80) then rounds
// differently whole and cut in two: without the mode, 1 and 2 threads differ here.
RunResult train(bool deterministic_on, int threads, int64_t steps) {
  ThreadSetup setup(deterministic_on, threads);
  test::SmallEncoderTrainer trainer({.vocab = 64,
                                     .d_model = 40,
                                     .heads = 4,
                                     .ffn = 80,
                                     .layers = 2,
                                     .classes = 4,
                                     .batch = 16,
                                     .lengths = {32},
                                     .dropout = 0.1,
                                     .seed = 5});
  RunResult r;
  for (int64_t s = 0; s < steps; ++s) r.losses.push_back(trainer.step(s));
  for (const Tensor& p : trainer.model().parameters()) {
    r.grads.push_back(p.grad().to_vector<float>());
    r.params.push_back(p.to_vector<float>());
  }
  return r;
}

// Bitwise: the bytes of every float, so -0.0 vs 0.0 or two NaNs with other payloads differ too.
template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

size_t differing_tensors(const std::vector<std::vector<float>>& a,
                         const std::vector<std::vector<float>>& b) {
  size_t n = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += bitwise_equal(a[i], b[i]) ? 0 : 1;
  return n;
}

}  // namespace

TEST_CASE("deterministic mode: an encoder's training steps are bitwise equal on 1 and 2 threads",
          "[nn]") {
  const RunResult one = train(true, 1, 3);
  const RunResult two = train(true, 2, 3);
  REQUIRE(one.grads.size() > 10);
  for (size_t i = 0; i < one.losses.size(); ++i) {
    INFO("step " << i << ": loss " << one.losses[i] << " vs " << two.losses[i]);
    CHECK(bitwise_equal(std::vector<double>{one.losses[i]}, std::vector<double>{two.losses[i]}));
  }
  CHECK(differing_tensors(one.grads, two.grads) == 0);
  CHECK(differing_tensors(one.params, two.params) == 0);
  // Without the mode the parts follow the thread count; the difference, if any, is reported
  // (OpenBLAS and the split GEMM may or may not round differently on this machine).
  const RunResult free_two = train(false, 2, 3);
  WARN("without deterministic mode, 1 vs 2 threads: "
       << differing_tensors(train(false, 1, 3).grads, free_two.grads) << " of "
       << free_two.grads.size() << " gradients differ");
}

TEST_CASE("deterministic mode: NABLA_DETERMINISTIC=1 turns it on, runtime_info reports it",
          "[nn]") {
  // ctest runs the suites without the variable; the mode is off unless asked for.
  const char* env = std::getenv("NABLA_DETERMINISTIC");
  CHECK(deterministic() == (env != nullptr && std::string(env) == "1"));
  const bool prev = deterministic();
  set_deterministic(true);
  CHECK(split_parts() == kDeterministicParts);
  CHECK(runtime_info().find("deterministic") != std::string::npos);
  set_deterministic(false);
  CHECK(split_parts() == num_threads());
  CHECK(runtime_info().find("deterministic") == std::string::npos);
  set_deterministic(prev);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
