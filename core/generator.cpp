#include "core/generator.h"

#include <cmath>
#include <numbers>

namespace nabla {

namespace {

// Philox-4x32 with 10 rounds (Salmon et al., SC'11); constants from the paper. Counter (x0, x1)
// with x2 = x3 = 0, key (k0, k1) = the seed. The 32x32 -> 64-bit products are written as uint64
// multiplies, which GCC vectorises when this runs in a loop over counters.
[[gnu::always_inline]] inline void philox10(uint32_t& x0, uint32_t& x1, uint32_t& x2, uint32_t& x3,
                                            uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * x0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * x2;
    x0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
    x1 = static_cast<uint32_t>(p1);
    x2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
    x3 = static_cast<uint32_t>(p0);
    k0 += kW0;
    k1 += kW1;
  }
}

}  // namespace

std::array<uint32_t, 4> Generator::block(uint64_t c) const {
  uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32), x2 = 0, x3 = 0;
  philox10(x0, x1, x2, x3, static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32));
  return {x0, x1, x2, x3};
}

void Generator::blocks(uint64_t first, int64_t n, uint32_t* out) const {
  const auto k0 = static_cast<uint32_t>(seed_), k1 = static_cast<uint32_t>(seed_ >> 32);
  // One counter per lane; the four words are stored interleaved, in block() order.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t c = first + static_cast<uint64_t>(i);
    uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32), x2 = 0, x3 = 0;
    philox10(x0, x1, x2, x3, k0, k1);
    out[4 * i] = x0;
    out[4 * i + 1] = x1;
    out[4 * i + 2] = x2;
    out[4 * i + 3] = x3;
  }
}

uint64_t Generator::bits64(uint64_t c) const {
  auto b = block(c);
  return (static_cast<uint64_t>(b[0]) << 32) | b[1];
}

double Generator::uniform(uint64_t c) const {
  return static_cast<double>(bits64(c) >> 11) * 0x1.0p-53;
}

double Generator::normal(uint64_t c) const {
  auto b = block(c);
  uint64_t a = (static_cast<uint64_t>(b[0]) << 32) | b[1];
  uint64_t d = (static_cast<uint64_t>(b[2]) << 32) | b[3];
  // u1 in (0, 1] so log(u1) is finite.
  double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;
  double u2 = static_cast<double>(d >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace nabla
