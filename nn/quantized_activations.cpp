// The activation side of dynamic int8 quantisation (nn/quantized.h): the per-call range, the
// quantisation to u8 (vectorised per SIMD row of the machine profile, split over threads) and
// whether this CPU needs 7-bit activations.
#include "nabla/nn/quantized.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "nabla/core/machine.h"
#include "nabla/core/parallel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nabla::nn {
namespace {

// The range and quantisation kernels, one per SIMD row; each takes [b, e) of the arrays.
// NaN is tracked apart (min and max skip it): x != x only for a NaN.
void range_scalar(const float* x, int64_t b, int64_t e, float& lo, float& hi, bool& nan) {
  for (int64_t i = b; i < e; ++i)
    lo = std::min(lo, x[i]), hi = std::max(hi, x[i]), nan |= x[i] != x[i];
}
void quantize_scalar(const float* x, int64_t b, int64_t e, float inv_scale, float zp, float qmax,
                     uint8_t* out) {
  for (int64_t i = b; i < e; ++i)
    out[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(x[i] * inv_scale) + zp, 0.0f, qmax));
}

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*, which its -Wuninitialized reports
// (GCC bug 105593, fixed in GCC 13); nothing here reads an undefined lane.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) int64_t range_avx512(const float* x, int64_t b, int64_t e,
                                                        float& lo, float& hi, bool& nan) {
  __m512 l0 = _mm512_set1_ps(lo), h0 = _mm512_set1_ps(hi), l1 = l0, h1 = h0;
  __mmask16 bad = 0;
  int64_t i = b;
  for (; i + 32 <= e; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), c = _mm512_loadu_ps(x + i + 16);
    bad |= _mm512_cmp_ps_mask(a, c, _CMP_UNORD_Q);  // a NaN in either
    l0 = _mm512_min_ps(l0, a), h0 = _mm512_max_ps(h0, a);
    l1 = _mm512_min_ps(l1, c), h1 = _mm512_max_ps(h1, c);
  }
  alignas(64) float ls[16], hs[16];
  _mm512_store_ps(ls, _mm512_min_ps(l0, l1)), _mm512_store_ps(hs, _mm512_max_ps(h0, h1));
  lo = *std::min_element(ls, ls + 16), hi = *std::max_element(hs, hs + 16);
  nan |= bad != 0;
  return i;
}
// 16 floats -> 16 bytes: round half to even, add the zero point, clamp, narrow.
__attribute__((target("avx512f"))) int64_t quantize_avx512(const float* x, int64_t b, int64_t e,
                                                           float inv_scale, float zp, float qmax,
                                                           uint8_t* out) {
  const __m512 inv = _mm512_set1_ps(inv_scale), z = _mm512_set1_ps(zp), top = _mm512_set1_ps(qmax),
               zero = _mm512_setzero_ps();
  int64_t i = b;
  for (; i + 16 <= e; i += 16) {
    __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, z), zero), top);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm512_cvtusepi32_epi8(_mm512_cvtps_epu32(v)));
  }
  return i;
}
#pragma GCC diagnostic pop

__attribute__((target("avx2"))) int64_t range_avx2(const float* x, int64_t b, int64_t e, float& lo,
                                                   float& hi, bool& nan) {
  __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi), bad = _mm256_setzero_ps();
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    const __m256 a = _mm256_loadu_ps(x + i);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    l = _mm256_min_ps(l, a), h = _mm256_max_ps(h, a);
  }
  alignas(32) float ls[8], hs[8];
  _mm256_store_ps(ls, l), _mm256_store_ps(hs, h);
  lo = *std::min_element(ls, ls + 8), hi = *std::max_element(hs, hs + 8);
  nan |= _mm256_movemask_ps(bad) != 0;
  return i;
}
// 8 floats -> 8 int32: round half to even, add the zero point, clamp.
__attribute__((target("avx2"), always_inline)) inline __m256i quantize8_avx2(const float* x,
                                                                             __m256 inv, __m256 z,
                                                                             __m256 top) {
  const __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), inv),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_cvtps_epi32(
      _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, z), _mm256_setzero_ps()), top));
}
// 32 floats -> 32 bytes; the two packs interleave 128-bit lanes, the permute restores the order.
__attribute__((target("avx2"))) int64_t quantize_avx2(const float* x, int64_t b, int64_t e,
                                                      float inv_scale, float zp, float qmax,
                                                      uint8_t* out) {
  const __m256 inv = _mm256_set1_ps(inv_scale), z = _mm256_set1_ps(zp), top = _mm256_set1_ps(qmax);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = b;
  for (; i + 32 <= e; i += 32) {
    const __m256i w01 = _mm256_packus_epi32(quantize8_avx2(x + i, inv, z, top),
                                            quantize8_avx2(x + i + 8, inv, z, top));
    const __m256i w23 = _mm256_packus_epi32(quantize8_avx2(x + i + 16, inv, z, top),
                                            quantize8_avx2(x + i + 24, inv, z, top));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
  }
  return i;
}
#endif

void range_part(const float* x, int64_t b, int64_t e, float& lo, float& hi, bool& nan) {
#if defined(__x86_64__)
  const machine::Isa simd = machine::profile().simd;
  if (simd == machine::Isa::Avx512) b = range_avx512(x, b, e, lo, hi, nan);
  if (simd >= machine::Isa::Avx2) b = range_avx2(x, b, e, lo, hi, nan);
#endif
  range_scalar(x, b, e, lo, hi, nan);
}
void quantize_part(const float* x, int64_t b, int64_t e, float inv_scale, float zp, float qmax,
                   uint8_t* out) {
#if defined(__x86_64__)
  const machine::Isa simd = machine::profile().simd;
  if (simd == machine::Isa::Avx512) b = quantize_avx512(x, b, e, inv_scale, zp, qmax, out);
  if (simd >= machine::Isa::Avx2) b = quantize_avx2(x, b, e, inv_scale, zp, qmax, out);
#endif
  quantize_scalar(x, b, e, inv_scale, zp, qmax, out);
}

}  // namespace

ActivationQuantization choose_activation_quantization(float lo, float hi, bool reduce_range) {
  ActivationQuantization q;
  q.qmax = reduce_range ? 127 : 255;
  lo = std::min(lo, 0.0f), hi = std::max(hi, 0.0f);  // 0 is exact, as padding needs
  q.scale = (hi - lo) / static_cast<float>(q.qmax);
  if (q.scale == 0.0f || std::isinf(1.0f / q.scale)) q.scale = 0.1f;  // choose_qparams' choice
  const float zp = std::nearbyint(-lo / q.scale);
  q.zero_point = static_cast<int32_t>(std::clamp(zp, 0.0f, static_cast<float>(q.qmax)));
  return q;
}

std::pair<float, float> activation_range(const float* x, int64_t n) {
  const int64_t parts = n * 2 >= parallel_grain() && !in_parallel_part() ? split_parts() : 1;
  std::vector<float> lo(parts, std::numeric_limits<float>::infinity()),
      hi(parts, -std::numeric_limits<float>::infinity());
  std::vector<char> nan(parts, 0);
  run_parts(parts, [&](int64_t p) {
    bool bad = false;
    range_part(x, n * p / parts, n * (p + 1) / parts, lo[p], hi[p], bad);
    nan[p] = bad;
  });
  if (std::find(nan.begin(), nan.end(), 1) != nan.end()) return {NAN, NAN};
  return {*std::min_element(lo.begin(), lo.end()), *std::max_element(hi.begin(), hi.end())};
}

void quantize_activations(const float* x, int64_t n, const ActivationQuantization& q,
                          uint8_t* out) {
  const float inv_scale = 1.0f / q.scale, zp = static_cast<float>(q.zero_point),
              qmax = static_cast<float>(q.qmax);
  parallel_for(n, 2,
               [&](int64_t b, int64_t e) { quantize_part(x, b, e, inv_scale, zp, qmax, out); });
}

bool default_reduce_range() {
  // The kernel's flag names in /proc/cpuinfo: clang 14's __builtin_cpu_supports does not know
  // "avxvnni" (a compile error), and gcc's does not know every VNNI flag on every target.
  static const bool reduce = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);)
      if (line.rfind("flags", 0) == 0)
        return line.find(" avx512_vnni") == std::string::npos &&
               line.find(" avx_vnni") == std::string::npos;
    return true;
  }();
  return reduce;
}

}  // namespace nabla::nn
