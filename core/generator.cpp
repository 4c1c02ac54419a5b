#include "nabla/core/generator.h"

#include <cmath>
#include <cstdint>
#include <numbers>

#include "nabla/core/machine.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// Portable batch: one counter per SIMD lane, as far as the compiler vectorises it.
void blocks_portable(uint64_t seed, uint64_t first, int64_t n, uint32_t* out) {
  const auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
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

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused merge source of unmasked
// intrinsics, which -Wmaybe-uninitialized reports as a false positive.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// AVX-512: 16 counters in the 32-bit lanes of one register. NOTE: the compiler vectorises the
// portable loop with 64-bit multiplies (vpmullq, 3 uops) and many permutes; here each 32x32 ->
// 64-bit product is vpmuludq on the even lanes and on the odd lanes moved down by a shuffle, and
// masked shuffles sort the high and low halves back into place (1.4 vs 3.9 ns per block, 2.8x, on
// the 2-core Intel host). Bit-identical to philox10 (tests/core/test_generator.cpp).
__attribute__((target("avx512f"))) int64_t blocks_avx512(uint64_t seed, uint64_t first, int64_t n,
                                                         uint32_t* out) {
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __mmask16 odd = 0xAAAA, even = 0x5555;
  const auto up = static_cast<_MM_PERM_ENUM>(0xF5);    // words 1, 1, 3, 3: odd lanes to even
  const auto down = static_cast<_MM_PERM_ENUM>(0xA0);  // words 0, 0, 2, 2: even lanes to odd
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint64_t c = first + static_cast<uint64_t>(i);
    const __m512i c_lo = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(c)));
    const __m512i c_hi = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(c >> 32)));
    __m512i x0 = _mm512_add_epi32(c_lo, lane);  // counter c + j: low word, then the carry
    __m512i x1 =
        _mm512_mask_add_epi32(c_hi, _mm512_cmplt_epu32_mask(x0, c_lo), c_hi, _mm512_set1_epi32(1));
    __m512i x2 = _mm512_setzero_si512(), x3 = _mm512_setzero_si512();
    auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const __m512i p0_even = _mm512_mul_epu32(x0, m0);
      const __m512i p0_odd = _mm512_mul_epu32(_mm512_shuffle_epi32(x0, up), m0);
      const __m512i p1_even = _mm512_mul_epu32(x2, m1);
      const __m512i p1_odd = _mm512_mul_epu32(_mm512_shuffle_epi32(x2, up), m1);
      const __m512i hi0 = _mm512_mask_shuffle_epi32(p0_odd, even, p0_even, up);
      const __m512i lo0 = _mm512_mask_shuffle_epi32(p0_even, odd, p0_odd, down);
      const __m512i hi1 = _mm512_mask_shuffle_epi32(p1_odd, even, p1_even, up);
      const __m512i lo1 = _mm512_mask_shuffle_epi32(p1_even, odd, p1_odd, down);
      x0 = _mm512_ternarylogic_epi32(hi1, x1, _mm512_set1_epi32(static_cast<int>(k0)), 0x96);
      x1 = lo1;
      x2 = _mm512_ternarylogic_epi32(hi0, x3, _mm512_set1_epi32(static_cast<int>(k1)), 0x96);
      x3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Transpose to block order: out[4 j + w] = word w of counter c + j.
    const __m512i a01_lo = _mm512_unpacklo_epi32(x0, x1), a01_hi = _mm512_unpackhi_epi32(x0, x1);
    const __m512i a23_lo = _mm512_unpacklo_epi32(x2, x3), a23_hi = _mm512_unpackhi_epi32(x2, x3);
    // b0 holds blocks 0 4 8 12 (one per 128-bit lane), b1 1 5 9 13, b2 2 6 10 14, b3 3 7 11 15.
    const __m512i b0 = _mm512_unpacklo_epi64(a01_lo, a23_lo);
    const __m512i b1 = _mm512_unpackhi_epi64(a01_lo, a23_lo);
    const __m512i b2 = _mm512_unpacklo_epi64(a01_hi, a23_hi);
    const __m512i b3 = _mm512_unpackhi_epi64(a01_hi, a23_hi);
    const __m512i t0 = _mm512_shuffle_i32x4(b0, b1, 0x44), t1 = _mm512_shuffle_i32x4(b2, b3, 0x44);
    const __m512i t2 = _mm512_shuffle_i32x4(b0, b1, 0xEE), t3 = _mm512_shuffle_i32x4(b2, b3, 0xEE);
    uint32_t* o = out + 4 * i;
    _mm512_storeu_si512(o, _mm512_shuffle_i32x4(t0, t1, 0x88));       // blocks 0-3
    _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));  // 4-7
    _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));  // 8-11
    _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));  // 12-15
  }
  return i;
}
#pragma GCC diagnostic pop

// AVX2: 8 counters in the 32-bit lanes of a 256-bit register, in G independent groups per
// iteration (the ten rounds are one dependency chain per group; two chains keep the multiplier
// busy while the other waits). AVX2 has no masked shuffles and no ternary logic: each 32x32 ->
// 64-bit product is vpmuludq on the even lanes and on the odd lanes shifted down, then blends put
// the high and low halves back in place, and the xors are two instructions. Bit-identical to
// philox10 (tests/core/test_generator.cpp).
template <int G>
__attribute__((target("avx2"), always_inline)) inline void philox_avx2_groups(uint64_t seed,
                                                                              uint64_t c,
                                                                              uint32_t* out) {
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);  // unsigned compare = signed on x ^ sign
  __m256i x0[G], x1[G], x2[G], x3[G];
  for (int g = 0; g < G; ++g) {
    const uint64_t cg = c + static_cast<uint64_t>(8 * g);
    const __m256i c_lo = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(cg)));
    const __m256i c_hi = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(cg >> 32)));
    x0[g] = _mm256_add_epi32(c_lo, lane);  // counter cg + j: low word, then the carry
    const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(c_lo, sign),
                                             _mm256_xor_si256(x0[g], sign));  // -1 where wrapped
    x1[g] = _mm256_sub_epi32(c_hi, carry);
    x2[g] = x3[g] = _mm256_setzero_si256();
  }
  auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0));
    const __m256i key1 = _mm256_set1_epi32(static_cast<int>(k1));
    for (int g = 0; g < G; ++g) {
      const __m256i p0_even = _mm256_mul_epu32(x0[g], m0);
      const __m256i p0_odd = _mm256_mul_epu32(_mm256_srli_epi64(x0[g], 32), m0);
      const __m256i p1_even = _mm256_mul_epu32(x2[g], m1);
      const __m256i p1_odd = _mm256_mul_epu32(_mm256_srli_epi64(x2[g], 32), m1);
      // hi: the even products' high words moved down, the odd products' in place; lo: the even
      // products' low words in place, the odd products' moved up.
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0_even, 32), p0_odd, 0xAA);
      const __m256i lo0 = _mm256_blend_epi32(p0_even, _mm256_slli_epi64(p0_odd, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1_even, 32), p1_odd, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(p1_even, _mm256_slli_epi64(p1_odd, 32), 0xAA);
      x0[g] = _mm256_xor_si256(_mm256_xor_si256(hi1, x1[g]), key0);
      x1[g] = lo1;
      x2[g] = _mm256_xor_si256(_mm256_xor_si256(hi0, x3[g]), key1);
      x3[g] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int g = 0; g < G; ++g) {
    // Transpose to block order: out[4 j + w] = word w of counter c + 8 g + j.
    const __m256i a01_lo = _mm256_unpacklo_epi32(x0[g], x1[g]);
    const __m256i a01_hi = _mm256_unpackhi_epi32(x0[g], x1[g]);
    const __m256i a23_lo = _mm256_unpacklo_epi32(x2[g], x3[g]);
    const __m256i a23_hi = _mm256_unpackhi_epi32(x2[g], x3[g]);
    // b0 holds blocks 0 and 4 (one per 128-bit lane), b1 1 and 5, b2 2 and 6, b3 3 and 7.
    const __m256i b0 = _mm256_unpacklo_epi64(a01_lo, a23_lo);
    const __m256i b1 = _mm256_unpackhi_epi64(a01_lo, a23_lo);
    const __m256i b2 = _mm256_unpacklo_epi64(a01_hi, a23_hi);
    const __m256i b3 = _mm256_unpackhi_epi64(a01_hi, a23_hi);
    auto* o = reinterpret_cast<__m256i*>(out + 32 * g);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(b0, b1, 0x20));      // blocks 0, 1
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(b2, b3, 0x20));  // 2, 3
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(b0, b1, 0x31));  // 4, 5
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(b2, b3, 0x31));  // 6, 7
  }
}

__attribute__((target("avx2"))) int64_t blocks_avx2(uint64_t seed, uint64_t first, int64_t n,
                                                    uint32_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    philox_avx2_groups<2>(seed, first + static_cast<uint64_t>(i), out + 4 * i);
  for (; i + 8 <= n; i += 8)
    philox_avx2_groups<1>(seed, first + static_cast<uint64_t>(i), out + 4 * i);
  return i;
}

#endif

}  // namespace

std::array<uint32_t, 4> Generator::block(uint64_t c) const {
  uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32), x2 = 0, x3 = 0;
  philox10(x0, x1, x2, x3, static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32));
  return {x0, x1, x2, x3};
}

void Generator::blocks(uint64_t first, int64_t n, uint32_t* out) const {
  int64_t done = 0;
#if defined(__x86_64__)
  // The machine profile's SIMD level (core/machine.h): never above what the CPU runs.
  // AVX-512 takes runs of 16 blocks, AVX2 (on AVX-512 machines too) what is left in runs of 8.
  const machine::Isa simd = machine::profile().simd;
  if (n >= 16 && simd == machine::Isa::Avx512) done = blocks_avx512(seed_, first, n, out);
  if (n - done >= 8 && simd >= machine::Isa::Avx2)
    done += blocks_avx2(seed_, first + static_cast<uint64_t>(done), n - done, out + 4 * done);
#endif
  blocks_portable(seed_, first + static_cast<uint64_t>(done), n - done, out + 4 * done);
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
