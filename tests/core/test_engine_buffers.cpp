// The engine's gradient buffers: summing in place into a buffer only the engine can see, and
// slice/select adding their gradient into the window of that buffer. The results must equal the
// out-of-place sums, and no tensor a user or a hook holds may change.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// (rows, cols) float64 with distinct values.
Tensor weights(int64_t rows, int64_t cols, double base) {
  return add(mul(arange(rows * cols, kFloat64).reshape({rows, cols}), 0.25), base);
}

}  // namespace

TEST_CASE("slices of one tensor add their gradients into one buffer", "[core]") {
  Tensor x = weights(4, 6, -1.0).requires_grad_();
  Tensor w = weights(4, 6, 0.5);
  Tensor p = mul(x, 2.0);  // a non-leaf, so its gradient is a buffer for MulBackward
  // Disjoint column blocks (the q, k, v split of a packed projection), then overlapping ones.
  Tensor loss = add(add(sum(mul(p.narrow(1, 0, 2), w.narrow(1, 0, 2))),
                        sum(mul(p.narrow(1, 2, 2), w.narrow(1, 2, 2)))),
                    sum(mul(p.narrow(1, 4, 2), w.narrow(1, 4, 2))));
  loss = add(loss, sum(mul(p.narrow(1, 1, 4), w.narrow(1, 1, 4))));
  loss = add(loss, sum(mul(p.select(0, 2), w.select(0, 2))));
  loss = add(loss, sum(mul(p.slice(0, 0, 4, 2), w.slice(0, 0, 4, 2))));
  loss.backward();

  // Expected: d loss / d p accumulated by hand, times 2.
  std::vector<double> dp(24, 0.0), wv = w.to_vector<double>();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c) {
      const auto i = static_cast<size_t>(r * 6 + c);
      dp[i] += wv[i];                       // the three disjoint blocks cover every column
      if (c >= 1 && c < 5) dp[i] += wv[i];  // the overlapping block
      if (r == 2) dp[i] += wv[i];           // select
      if (r % 2 == 0) dp[i] += wv[i];       // slice with step 2
    }
  std::vector<double> got = x.grad().to_vector<double>();
  for (size_t i = 0; i < dp.size(); ++i) CHECK(got[i] == 2.0 * dp[i]);
}

TEST_CASE("a gradient a caller still holds is never added into", "[core]") {
  Tensor x = weights(3, 4, 1.0).requires_grad_();
  Tensor p = mul(x, 1.0);
  Tensor y = add(p, p);  // p's buffer would start as the caller's gradient itself
  Tensor g = weights(3, 4, 2.0);
  const std::vector<double> before = g.to_vector<double>();
  autograd::backward({p, y}, {g, g});
  CHECK(g.to_vector<double>() == before);
  std::vector<double> got = x.grad().to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 3.0 * before[i]);
}

TEST_CASE("hooks that keep a gradient see it unchanged after later sums", "[core]") {
  Tensor x = weights(2, 4, 0.0).requires_grad_();
  Tensor p = mul(x, 3.0);
  Tensor kept;
  Tensor a = p.narrow(1, 0, 2);
  a.register_hook([&](const Tensor& g) {
    kept = g;
    return Tensor();
  });
  Tensor loss = add(sum(mul(a, 5.0)), sum(mul(p, 7.0)));
  loss.backward();
  CHECK(kept.to_vector<double>() == std::vector<double>(4, 5.0));
  const std::vector<double> gx = x.grad().to_vector<double>();
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 4; ++c)
      CHECK(gx[static_cast<size_t>(r * 4 + c)] == 3.0 * (7.0 + (c < 2 ? 5.0 : 0.0)));
}

TEST_CASE("create_graph still records sums of sliced gradients", "[core]") {
  Tensor x = weights(2, 3, 0.5).requires_grad_();
  Tensor p = mul(x, x);
  Tensor loss = add(sum(mul(p.narrow(1, 0, 2), 3.0)), sum(p.narrow(1, 1, 2)));
  Tensor gx = autograd::grad({loss}, {x}, {}, false, true)[0];
  // d/dx of sum(gx) = 2 * (3 [c < 2] + [c >= 1]) per element, constant in x.
  Tensor ggx = autograd::grad({sum(gx)}, {x})[0];
  const std::vector<double> v = ggx.to_vector<double>();
  for (int64_t c = 0; c < 3; ++c)
    CHECK(v[static_cast<size_t>(c)] == 2.0 * ((c < 2 ? 3.0 : 0.0) + (c >= 1 ? 1.0 : 0.0)));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
