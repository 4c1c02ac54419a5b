// How parallel_for and the GEMM split cut their work: by num_threads() normally, by
// kDeterministicParts in deterministic mode whatever the thread count; a loop nested in a part
// runs whole whether the parts ran in parallel or one after another.
#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "nabla/ops/gemm.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

using Chunks = std::set<std::pair<int64_t, int64_t>>;

// The [begin, end) chunks parallel_for hands out for n items at `threads` threads.
Chunks chunks_of(int64_t n, int threads, bool det) {
  const int prev_threads = num_threads();
  const bool prev_det = deterministic(), prev_adaptive = adaptive_threads();
  set_num_threads(threads);
  set_deterministic(det);
  set_adaptive_threads(false);
  Chunks chunks;
  std::mutex m;
  parallel_for(n, parallel_grain(), [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    chunks.insert({b, e});
  });
  set_num_threads(prev_threads);
  set_deterministic(prev_det);
  set_adaptive_threads(prev_adaptive);
  return chunks;
}

}  // namespace

TEST_CASE("parallel_for: deterministic mode cuts the same chunks at any thread count", "[core]") {
  for (int64_t n : {int64_t{2}, int64_t{7}, int64_t{100}, int64_t{1001}}) {
    INFO("n = " << n);
    const Chunks det1 = chunks_of(n, 1, true);
    CHECK(static_cast<int64_t>(det1.size()) == std::min<int64_t>(n, kDeterministicParts));
    CHECK(chunks_of(n, 2, true) == det1);
    CHECK(chunks_of(n, 3, true) == det1);
    CHECK(chunks_of(n, 16, true) == det1);
    // Without the mode, the chunks follow the thread count (one chunk on one thread).
    CHECK(chunks_of(n, 1, false).size() == 1);
    CHECK(chunks_of(n, 2, false).size() == 2);
  }
}

TEST_CASE("parallel_for: a loop nested in a part runs whole, in parallel or in sequence",
          "[core]") {
  // Deterministic mode would cut the inner loop into 8 chunks if it ran outside a part. With one
  // thread the outer parts run in sequence (as under load), with two in parallel: either way the
  // inner loop must run whole, or results would depend on how the outer parts were run.
  const int prev = num_threads();
  const bool prev_det = deterministic(), prev_adaptive = adaptive_threads();
  set_deterministic(true);
  set_adaptive_threads(false);
  for (int threads : {1, 2}) {
    INFO(threads << " thread(s) running the outer parts");
    set_num_threads(threads);
    std::mutex m;
    std::vector<int64_t> inner_chunks;
    int64_t parts_inside = 0;  // Catch's CHECK is not thread-safe: count, then check
    run_parts(2, [&](int64_t) {
      const bool inside = in_parallel_part();
      int64_t chunks = 0;
      parallel_for(1000, parallel_grain(), [&](int64_t, int64_t) { ++chunks; });
      std::lock_guard<std::mutex> lock(m);
      inner_chunks.push_back(chunks);
      parts_inside += inside ? 1 : 0;
    });
    CHECK(parts_inside == 2);
    CHECK(inner_chunks == std::vector<int64_t>{1, 1});
    CHECK_FALSE(in_parallel_part());
    run_parts(1, [&](int64_t) { CHECK_FALSE(in_parallel_part()); });  // one part is no split
  }
  set_num_threads(prev);
  set_deterministic(prev_det);
  set_adaptive_threads(prev_adaptive);
}

TEST_CASE("gemm: deterministic mode gives bitwise the same product on 1, 2 and 3 threads",
          "[core]") {
  // 600 x 300 x 200: split into row blocks (8 in deterministic mode, one per thread otherwise).
  const int64_t m = 600, n = 300, k = 200;
  Generator g(11);
  const std::vector<float> a = randn({m, k}, g).to_vector<float>();
  const std::vector<float> b = randn({k, n}, g).to_vector<float>();
  const bool prev_det = deterministic(), prev_adaptive = adaptive_threads();
  const int prev = num_threads();
  set_deterministic(true);
  set_adaptive_threads(false);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<float> c(static_cast<size_t>(m * n));
    blas::gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    results.push_back(std::move(c));
  }
  set_num_threads(prev);
  set_deterministic(prev_det);
  set_adaptive_threads(prev_adaptive);
  CHECK(results[1] == results[0]);
  CHECK(results[2] == results[0]);
}

TEST_CASE("sum and clip_grad_norm_ give bitwise the same result on 1, 2 and 3 threads", "[core]") {
  // Not deterministic mode: sum_lanes' order is fixed by the length, and the full sum's blocks
  // by their fixed size, whatever the thread count. 300,007 elements: 19 blocks and a tail.
  Generator g(12);
  Tensor x = randn({300007}, g);
  Tensor rows = randn({700, 333}, g);
  Tensor p = zeros({300007}).requires_grad_();
  p.set_grad(x);
  const bool prev_adaptive = adaptive_threads();
  const int prev = num_threads();
  set_adaptive_threads(false);
  std::vector<float> totals, norms_as_float;
  std::vector<std::vector<float>> row_sums;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    totals.push_back(static_cast<float>(sum(x).item()));
    row_sums.push_back(sum(rows, {1}).to_vector<float>());
    norms_as_float.push_back(static_cast<float>(optim::clip_grad_norm_({p}, 1e30)));
  }
  set_num_threads(prev);
  set_adaptive_threads(prev_adaptive);
  CHECK(totals[1] == totals[0]);
  CHECK(totals[2] == totals[0]);
  CHECK(row_sums[1] == row_sums[0]);
  CHECK(row_sums[2] == row_sums[0]);
  CHECK(norms_as_float[1] == norms_as_float[0]);
  CHECK(norms_as_float[2] == norms_as_float[0]);
  // And the value itself: against a float64 sum.
  CHECK(totals[0] == Approx(sum(x.to(kFloat64)).item()).epsilon(1e-6));
}

TEST_CASE("Checkpoint: saved in deterministic mode, another thread count resumes without warning",
          "[core][io]") {
  const int prev = num_threads();
  const bool prev_det = deterministic();
  io::Checkpoint ck;
  ck.put_section("model", {{"w", ones({2})}});
  set_deterministic(true);
  set_num_threads(1);
  const std::string det_bytes = ck.serialize();
  set_deterministic(false);
  const std::string plain_bytes = ck.serialize();
  CHECK(det_bytes.find("\"nabla.deterministic\":\"1\"") != std::string::npos);
  CHECK(plain_bytes.find("nabla.deterministic") == std::string::npos);

  set_num_threads(2);
  set_deterministic(true);
  CHECK(io::Checkpoint::parse(det_bytes, "det.st").warnings().empty());
  const auto plain_in_det = io::Checkpoint::parse(plain_bytes, "plain.st").warnings();
  REQUIRE(plain_in_det.size() == 2);  // the mode and the thread count
  CHECK_THAT(plain_in_det[0], Catch::Contains("plain.st") &&
                                  Catch::Contains("saved outside deterministic mode") &&
                                  Catch::Contains("not bit for bit"));
  set_deterministic(false);
  const auto det_outside = io::Checkpoint::parse(det_bytes, "det.st").warnings();
  REQUIRE(det_outside.size() == 2);
  CHECK_THAT(det_outside[0], Catch::Contains("saved in deterministic mode, this process runs "
                                             "outside it"));
  set_num_threads(prev);
  set_deterministic(prev_det);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
