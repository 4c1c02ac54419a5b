// The 16-bit floating storage types: bfloat16 (1 sign, 8 exponent, 7 mantissa bits: float32's
// top half; Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning Training",
// arXiv:1905.12322) and float16 (IEEE 754-2008 binary16: 1, 5, 10 bits, subnormals below 2^-14).
// They hold bits only: arithmetic converts to float32 (the implicit `operator float`), so a
// generic kernel computes in float32 and rounds once when it stores. Conversions are integer code,
// so they give the same bits on every CPU whatever its rounding mode or FTZ/DAZ flags:
//  - float32 -> 16 bits rounds to nearest, ties to even (IEEE 754-2008 section 4.3.1);
//  - overflow gives +-Inf; a NaN stays a NaN with its sign, its quiet bit set and the payload's
//    top bits kept (PyTorch writes one canonical NaN instead; both are NaNs);
//  - float16 subnormals are produced and read exactly; 16 bits -> float32 is exact.
// float64 and int64 convert through float32, as PyTorch's c10::BFloat16/Half do (so a double
// rounds twice; the difference only shows on exact ties of the second rounding).
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>

namespace nabla {

namespace half_bits {

constexpr uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  // Adding 0x7fff plus the lowest kept bit carries into bit 16 exactly when the dropped half is
  // above one half, or one half with an odd kept part; a carry out of the mantissa raises the
  // exponent, and past the largest finite value it gives Inf (0x7f80).
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

constexpr float bf16_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// Rounds m / 2^shift to nearest, ties to even (shift >= 1).
constexpr uint32_t shift_round_even(uint32_t m, uint32_t shift) {
  const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

constexpr uint16_t float_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16 (or Inf): Inf
  if (a >= 0x38800000u) {  // float16 normal range [2^-14, 2^16): rebias 127 -> 15, drop 13 bits
    // A carry out of the mantissa moves to the next binade, or to Inf above 65504.
    return static_cast<uint16_t>(sign | shift_round_even(a - 0x38000000u, 13));
  }
  // Below 2^-14: a multiple of 2^-24 (a float16 subnormal, or 2^-14 itself after rounding up).
  // a = m * 2^(e - 150) with the implicit bit in m, so a / 2^-24 = m / 2^(126 - e).
  const uint32_t e = a >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (float32 subnormals included)
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_round_even(m, 126 - e));
}

constexpr float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));  // Inf, NaN
  if (e == 0) {
    if (m == 0) return std::bit_cast<float>(sign);
    // Subnormal m * 2^-24: normalise so the leading one becomes the implicit bit.
    e = 1;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    m &= 0x3ffu;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

}  // namespace half_bits

// Generic arithmetic (float64, int64, bool) converts through float32.
template <class T>
concept NonFloatArithmetic = std::is_arithmetic_v<T> && !std::is_same_v<T, float>;

struct bfloat16 {
  uint16_t bits = 0;
  constexpr bfloat16() = default;
  constexpr bfloat16(float f) : bits(half_bits::float_to_bf16(f)) {}  // NOLINT: as c10's
  template <NonFloatArithmetic T>
  constexpr explicit bfloat16(T v) : bfloat16(static_cast<float>(v)) {}
  constexpr operator float() const { return half_bits::bf16_to_float(bits); }  // NOLINT
  static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

struct float16 {
  uint16_t bits = 0;
  constexpr float16() = default;
  constexpr float16(float f) : bits(half_bits::float_to_f16(f)) {}  // NOLINT: as c10's Half
  template <NonFloatArithmetic T>
  constexpr explicit float16(T v) : float16(static_cast<float>(v)) {}
  constexpr operator float() const { return half_bits::f16_to_float(bits); }  // NOLINT
  static constexpr float16 from_bits(uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);
static_assert(std::is_trivially_copyable_v<bfloat16> && std::is_trivially_copyable_v<float16>);

template <class T>
inline constexpr bool is_reduced_float_v =
    std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

}  // namespace nabla
