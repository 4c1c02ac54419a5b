// bfloat16 / float16 conversions (core/half.h), checked exhaustively over every float32 bit
// pattern of chosen exponents against references written another way (rational arithmetic in
// double, and GCC's own _Float16 conversion where the compiler has it), and all 65536 patterns
// of each 16-bit format through float32 and back.
#include <bit>
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// float32 -> bfloat16 the long way: the two neighbouring bfloat16 values around |x| compared
// in double (their distances to x are exact there), ties to the even one; past the largest
// finite value the upper neighbour is 2^128, which becomes Inf.
uint16_t bf16_reference(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = u & 0x80000000u, a = u & 0x7fffffffu;
  if (a == 0x7f800000u) return static_cast<uint16_t>(u >> 16);  // +-Inf stays
  const uint32_t lo = a & 0xffff0000u, hi = lo + 0x10000u;
  auto value = [](uint32_t bits) {
    return bits >= 0x7f800000u ? std::ldexp(1.0, 128) : double(std::bit_cast<float>(bits));
  };
  const double d = double(std::bit_cast<float>(a));
  const double below = d - value(lo), above = value(hi) - d;
  uint32_t pick = below < above ? lo : above < below ? hi : ((lo >> 16) & 1u) ? hi : lo;
  return static_cast<uint16_t>((sign | pick) >> 16);
}

// float32 -> float16 value the long way: x / ulp rounded by nearbyint (ties to even in the
// default rounding mode), `ulp` being that of x's binade in float16, or 2^-24 below 2^-14.
double f16_reference_value(float x, double ulp) {
  const double d = x;
  if (d == 0 || std::isinf(d)) return d;
  const double r = std::nearbyint(d / ulp) * ulp;
  if (std::abs(r) > 65504.0) return std::copysign(INFINITY, d);
  return r == 0 ? std::copysign(0.0, d) : r;
}

// float16 bits -> value from the definition (IEEE 754-2008 3.4), not from half.h.
double f16_definition(uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = sign ? -1.0 : 1.0;
  if (e == 0x1f) return m ? NAN : s * INFINITY;
  return s * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// Every float32 with biased exponent `exp` (both signs when `both_signs`), in mantissa order.
template <class F>
void for_each_pattern(uint32_t exp, bool both_signs, F&& f) {
  for (uint32_t s = 0; s < (both_signs ? 2u : 1u); ++s)
    for (uint32_t m = 0; m < (1u << 23); ++m) f(std::bit_cast<float>((s << 31) | (exp << 23) | m));
}

}  // namespace

// Exponents: float32 subnormals (0), the bottom of the normal range (1), float16's subnormal
// range and its edges (101..113), around 1.0 (126, 127), float16's overflow edge (142, 143), the
// top of the float32 range (254) and Inf/NaN (255).
const std::vector<uint32_t> kExponents = {0,   1,   101, 102, 103, 112, 113,
                                          126, 127, 142, 143, 254, 255};

TEST_CASE("half: float32 -> bfloat16 rounds to nearest even, exhaustively over chosen exponents",
          "[core][half]") {
  for (uint32_t exp : kExponents) {
    INFO("exponent " << exp);
    int64_t bad = 0;
    for_each_pattern(exp, exp == 127 || exp == 254 || exp == 255, [&](float x) {
      const uint16_t got = bfloat16(x).bits;
      if (std::isnan(x)) {
        // NaN stays NaN: sign kept, quiet bit set.
        const uint32_t u = std::bit_cast<uint32_t>(x);
        bad += !(std::isnan(float(bfloat16::from_bits(got))) && (got & 0x0040u) &&
                 (got >> 15) == (u >> 31));
      } else {
        bad += got != bf16_reference(x);
      }
    });
    CHECK(bad == 0);
  }
}

TEST_CASE("half: float32 -> float16 rounds to nearest even, exhaustively over chosen exponents",
          "[core][half]") {
  for (uint32_t exp : kExponents) {
    INFO("exponent " << exp);
    int64_t bad = 0, bad_compiler = 0;
    // float16's ulp for this float32 exponent (binade 2^(exp - 127); float32 subnormals too).
    const double ulp = std::ldexp(1.0, std::max(static_cast<int>(exp) - 127, -14) - 10);
    for_each_pattern(exp, exp == 112 || exp == 255, [&](float x) {
      const uint16_t got = float16(x).bits;
      // (The decoding is checked against f16_definition for all 65536 patterns below.)
      const double got_value = float(float16::from_bits(got));
      if (std::isnan(x)) {
        const uint32_t u = std::bit_cast<uint32_t>(x);
        bad += !(std::isnan(got_value) && (got & 0x0200u) && (got >> 15) == (u >> 31));
        return;
      }
      const double want = f16_reference_value(x, ulp);
      // Equal values with equal signs (zeros included).
      bad += !(got_value == want && std::signbit(got_value) == std::signbit(want));
#ifdef __FLT16_MAX__
      // GCC's own conversion (libgcc soft-float at -O0: ~50 ns, so every 8th pattern).
      if ((std::bit_cast<uint32_t>(x) & 7u) == 0)
        bad_compiler += std::bit_cast<uint16_t>(static_cast<_Float16>(x)) != got;
#endif
    });
    CHECK(bad == 0);
    CHECK(bad_compiler == 0);
  }
}

TEST_CASE("half: every bfloat16 and float16 pattern converts to float32 exactly and back",
          "[core][half]") {
  int64_t bad_bf16 = 0, bad_f16 = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float bf = bfloat16::from_bits(h), f16 = float16::from_bits(h);
    // bfloat16 is float32's top half; float16 by the definition.
    bad_bf16 += std::bit_cast<uint32_t>(bf) != (b << 16);
    const double def = f16_definition(h);
    bad_f16 += !(std::isnan(def) ? std::isnan(f16)
                                 : double(f16) == def && std::signbit(f16) == std::signbit(def));
    // Back: the same bits; a signalling NaN comes back quiet.
    const bool bf_nan = std::isnan(bf), f16_nan = std::isnan(f16);
    bad_bf16 += bfloat16(bf).bits != (bf_nan ? (h | 0x0040u) : h);
    bad_f16 += float16(f16).bits != (f16_nan ? (h | 0x0200u) : h);
  }
  CHECK(bad_bf16 == 0);
  CHECK(bad_f16 == 0);
}

TEST_CASE("half: named cases (ties, overflow, subnormals, signed zero, NaN, Inf)", "[core][half]") {
  // bfloat16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> even (1).
  CHECK(bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);
  CHECK(bfloat16(1.0f + 0x1p-7f + 0x1p-8f).bits == 0x3f82);  // tie, odd below -> up
  CHECK(bfloat16(3.3895314e38f).bits == 0x7f7f);             // largest finite bfloat16
  CHECK(bfloat16(3.4028235e38f).bits == 0x7f80);             // FLT_MAX rounds to Inf
  CHECK(bfloat16(-3.4028235e38f).bits == 0xff80);
  CHECK(bfloat16(-0.0f).bits == 0x8000);
  CHECK(bfloat16(0x1p-149f).bits == 0x0000);  // float32's smallest subnormal -> 0 (tie, even)
  CHECK(bfloat16(0x1p-133f).bits == 0x0001);  // bfloat16's smallest subnormal
  CHECK(bfloat16(INFINITY).bits == 0x7f80);
  CHECK(bfloat16(-NAN).bits == 0xffc0);

  CHECK(float16(65504.0f).bits == 0x7bff);
  CHECK(float16(65519.996f).bits == 0x7bff);  // below the midpoint to 65536
  CHECK(float16(65520.0f).bits == 0x7c00);    // the midpoint: ties to even = Inf
  CHECK(float16(-1e6f).bits == 0xfc00);
  CHECK(float16(0x1p-24f).bits == 0x0001);             // smallest subnormal
  CHECK(float16(0x1p-25f).bits == 0x0000);             // half of it: tie -> even (0)
  CHECK(float16(0x1.8p-25f).bits == 0x0001);           // above the tie
  CHECK(float16(0x1.8p-24f).bits == 0x0002);           // 1.5 ulp: tie -> even (2)
  CHECK(float16(0x1p-14f - 0x1p-25f).bits == 0x0400);  // rounds up into the normal range
  CHECK(float16(-0.0f).bits == 0x8000);
  CHECK(float16(NAN).bits == 0x7e00);
  CHECK(float(float16::from_bits(0x0001)) == 0x1p-24f);
  CHECK(float(float16::from_bits(0x03ff)) == 0x1.ff8p-15f);  // largest subnormal
  CHECK(std::isinf(float(float16::from_bits(0xfc00))));

  // float64 converts through float32, as PyTorch's c10 types do.
  CHECK(bfloat16(1.0 / 3.0).bits == bfloat16(float(1.0 / 3.0)).bits);
  CHECK(float16(int64_t{70000}).bits == 0x7c00);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
