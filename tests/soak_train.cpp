// soak_train STEPS: trains the small encoder of tests/small_encoder_trainer.h for STEPS steps
// and prints one line that identifies the result bit for bit (every loss and the final
// parameters, hashed) and the time it took. tests/soak.sh runs it alone and twice at once.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string>

#include "tests/small_encoder_trainer.h"

namespace {

// FNV-1a over raw bytes: equal hashes of a whole run mean (but for a 2^-64 chance) equal bits.
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::stoll(argv[1]) : 200;
  const auto t0 = std::chrono::steady_clock::now();
  nabla::test::SmallEncoderTrainer trainer({.d_model = 64, .ffn = 128, .batch = 16});
  uint64_t losses = 14695981039346656037ull, params = losses;
  double last = 0;
  for (int64_t s = 0; s < steps; ++s) {
    last = trainer.step(s);
    losses = fnv1a(losses, &last, sizeof last);
  }
  for (const nabla::Tensor& p : trainer.model().parameters()) {
    const std::vector<float> v = p.to_vector<float>();
    params = fnv1a(params, v.data(), v.size() * sizeof(float));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("RESULT steps={} final_loss={:.6f} losses={:016x} params={:016x} seconds={:.2f}\n",
             steps, last, losses, params, seconds);
  return 0;
}
