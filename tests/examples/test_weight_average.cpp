// WeightAverage (examples/common/weight_average.h): the warm-started moving average, exact on
// hand-computed values; swap and its undo; the state a checkpoint keeps; bad decays.
#include "examples/common/weight_average.h"

#include <algorithm>

#include "tests/helpers.h"

using namespace nabla;
using examples::WeightAverage;

namespace {

// One float32 parameter w (2 values).
struct AveragedPair : nn::Module {
  Tensor w;
  explicit AveragedPair(std::vector<float> v) : Module("AveragedPair") {
    w = register_parameter("w", from_vector(v, {2}));
  }
  void set(std::vector<float> v) {
    NoGradGuard no_grad;
    w.copy_(from_vector(v, {2}));
  }
};

std::vector<float> pair_values(const Tensor& t) { return t.contiguous().to_vector<float>(); }

void check_pair_close(const Tensor& t, double a, double b) {
  const auto v = pair_values(t);
  CHECK(v[0] == Approx(a).epsilon(1e-6));
  CHECK(v[1] == Approx(b).epsilon(1e-6));
}

}  // namespace

TEST_CASE("WeightAverage: warm-started decay min(d, (1 + n) / (10 + n))", "[examples][average]") {
  AveragedPair m({1, 2});
  WeightAverage avg(m, 0.5);
  CHECK(avg.updates() == 0);
  m.set({11, 22});
  avg.update();  // n = 0: decay 1/10, average 0.1 * (1, 2) + 0.9 * (11, 22)
  CHECK(avg.updates() == 1);
  avg.swap();
  check_pair_close(m.w, 10, 20);
  avg.swap();
  CHECK(pair_values(m.w) == std::vector<float>{11, 22});
  m.set({0, 0});
  for (int i = 0; i < 8; ++i) avg.update();  // n = 1..8: (1 + n) / (10 + n) < 0.5
  // decays 2/11, 3/12, ..., 9/18 (n = 8 reaches the cap 0.5): average 10 * prod(d), 20 * prod(d)
  double keep = 1;
  for (int n = 1; n <= 8; ++n) keep *= std::min(0.5, (1.0 + n) / (10.0 + n));
  avg.swap();
  check_pair_close(m.w, 10 * keep, 20 * keep);
}

TEST_CASE("WeightAverage: its state dict restores the average and the count",
          "[examples][average]") {
  AveragedPair m({1, 2});
  WeightAverage avg(m, 0.9);
  m.set({3, 5});
  avg.update();
  avg.update();
  const nn::StateDict saved = avg.state_dict();
  CHECK(saved.size() == 2);  // p0 and updates
  AveragedPair other({7, 7});
  WeightAverage restored(other, 0.9);
  restored.load_state_dict(saved);
  CHECK(restored.updates() == 2);
  restored.swap();
  avg.swap();
  CHECK(pair_values(other.w) == pair_values(m.w));
}

TEST_CASE("WeightAverage: a decay outside [0, 1) is an error naming it", "[examples][average]") {
  AveragedPair m({1, 2});
  CHECK_THROWS_WITH(WeightAverage(m, 1.0),
                    Catch::Matchers::Contains("decay must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(WeightAverage(m, -0.1), Catch::Matchers::Contains("got -0.1"));
}
