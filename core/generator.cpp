#include "core/generator.h"

#include <cmath>
#include <numbers>

namespace nabla {

std::array<uint32_t, 4> Generator::block(uint64_t c) const {
  // Philox-4x32 with 10 rounds (Salmon et al., SC'11); constants from the paper.
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::array<uint32_t, 4> x = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u};
  uint32_t k0 = static_cast<uint32_t>(seed_), k1 = static_cast<uint32_t>(seed_ >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * x[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * x[2];
    x = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += kW0;
    k1 += kW1;
  }
  return x;
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
