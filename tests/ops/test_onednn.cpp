// The oneDNN backend (ops/kernels/onednn.h): the bf16 and int8 products against float64
// references computed from the same low-precision values, the primitive cache and the thread
// count. Without oneDNN every entry point must say so (tests/onednn_missing.cpp).
#include "nabla/ops/kernels/onednn.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "nabla/core/parallel.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

// float32 -> bfloat16 bits, round to nearest even; test-only (the library's conversion belongs
// to the bf16 dtype).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint16_t> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = to_bf16(d(gen));
  return v;
}

// Holds the thread settings a test changes.
struct ThreadsRestore {
  int threads = num_threads();
  bool adaptive = adaptive_threads(), det = deterministic();
  ~ThreadsRestore() {
    set_num_threads(threads);
    set_adaptive_threads(adaptive);
    set_deterministic(det);
  }
};

struct Bf16Case {
  int64_t batch, m, n, k;
  bool ta, tb;
  int64_t pad;       // added to every leading dim
  bool broadcast_b;  // one B for every batch entry
};

void check_bf16(const Bf16Case& c) {
  CAPTURE(c.batch, c.m, c.n, c.k, c.ta, c.tb, c.pad, c.broadcast_b);
  onednn::Bf16Matmul p;
  p.batch = c.batch, p.m = c.m, p.n = c.n, p.k = c.k, p.trans_a = c.ta, p.trans_b = c.tb;
  p.lda = (c.ta ? c.m : c.k) + c.pad, p.ldb = (c.tb ? c.k : c.n) + c.pad, p.ldc = c.n + c.pad;
  const int64_t rows_a = c.ta ? c.k : c.m, rows_b = c.tb ? c.n : c.k;
  p.batch_stride_a = rows_a * p.lda;
  p.batch_stride_b = c.broadcast_b ? 0 : rows_b * p.ldb;
  p.batch_stride_c = c.m * p.ldc;
  const auto a = random_bf16(c.batch * p.batch_stride_a, 1);
  const auto b = random_bf16(std::max<int64_t>(c.batch * p.batch_stride_b, rows_b * p.ldb), 2);
  std::vector<float> out(c.batch * p.batch_stride_c, -7.0f);
  onednn::matmul_bf16(p, a.data(), b.data(), out.data());
  for (int64_t q = 0; q < c.batch; ++q)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t t = 0; t < c.k; ++t) {
          const double x =
              from_bf16(a[q * p.batch_stride_a + (c.ta ? t * p.lda + i : i * p.lda + t)]);
          const double y =
              from_bf16(b[q * p.batch_stride_b + (c.tb ? j * p.ldb + t : t * p.ldb + j)]);
          ref += x * y, mag += std::fabs(x * y);
        }
        // bf16 x bf16 products are exact in float32; only the float32 sum rounds.
        const double bound = static_cast<double>(c.k + 2) * 0x1p-24 * mag + 1e-30;
        const double got = out[q * p.batch_stride_c + i * p.ldc + j];
        if (std::fabs(got - ref) > bound)
          FAIL("C[" << q << "," << i << "," << j << "] = " << got << ", reference " << ref);
      }
  // The padding between rows of C is not written.
  if (c.pad > 0) CHECK(out[c.n] == -7.0f);
}

// The int8 product's exact float64 reference.
double int8_reference(const onednn::Int8Linear& p, const std::vector<uint8_t>& x,
                      const std::vector<int8_t>& w, const std::vector<float>& scales,
                      const float* bias, int64_t i, int64_t j) {
  int64_t acc = 0;
  for (int64_t t = 0; t < p.k; ++t)
    acc += (int64_t{x[i * p.ldx + t]} - p.x_zero_point) * int64_t{w[j * p.k + t]};
  double y = static_cast<double>(p.x_scale) * scales[j] * static_cast<double>(acc) +
             (bias ? bias[j] : 0.0);
  switch (p.activation) {
    case onednn::Activation::None:
      break;
    case onednn::Activation::ReLU:
      y = std::max(y, 0.0);
      break;
    case onednn::Activation::GELU:
      y = 0.5 * y * (1 + std::erf(y / std::sqrt(2.0)));
      break;
    case onednn::Activation::GELUTanh:
      y = 0.5 * y * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (y + 0.044715 * y * y * y)));
      break;
  }
  return y;
}

void check_int8(int64_t m, int64_t n, int64_t k, int32_t zero_point, bool with_bias,
                onednn::Activation act, int64_t pad = 0) {
  CAPTURE(m, n, k, zero_point, with_bias, static_cast<int>(act), pad);
  std::mt19937 gen(static_cast<uint32_t>(m * 131 + n * 17 + k));
  std::uniform_int_distribution<int> u8(0, 255), s8(-127, 127);
  std::uniform_real_distribution<float> pos(0.001f, 0.02f), any(-3.0f, 3.0f);
  onednn::Int8Linear p;
  p.m = m, p.n = n, p.k = k, p.ldx = k + pad, p.ldc = n + pad;
  p.x_scale = 0.037f, p.x_zero_point = zero_point, p.activation = act;
  std::vector<uint8_t> x(std::max<int64_t>(m * p.ldx, 1));
  std::vector<int8_t> w(std::max<int64_t>(n * k, 1));
  std::vector<float> scales(n), bias(n), out(std::max<int64_t>(m * p.ldc, 1), -7.0f);
  for (auto& v : x) v = static_cast<uint8_t>(u8(gen));
  for (auto& v : w) v = static_cast<int8_t>(s8(gen));
  for (auto& v : scales) v = pos(gen);
  for (auto& v : bias) v = any(gen);
  const float* bias_ptr = with_bias ? bias.data() : nullptr;
  onednn::linear_u8s8(p, x.data(), w.data(), scales.data(), bias_ptr, out.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double ref = int8_reference(p, x, w, scales, bias_ptr, i, j);
      // Exact int32 sum; the scaling, the bias (added as bias / scale, oneDNN 2.6's order) and
      // the activation round in float32.
      // oneDNN's GELU is a polynomial, within ~1e-7 absolute where GELU is tiny.
      const bool gelu = act == onednn::Activation::GELU || act == onednn::Activation::GELUTanh;
      const double bound = 1e-5 * (std::fabs(ref) + (with_bias ? std::fabs(bias[j]) : 0) + 1e-3) +
                           (gelu ? 1e-6 : 0.0);
      const double got = out[i * p.ldc + j];
      if (std::fabs(got - ref) > bound)
        FAIL("C[" << i << "," << j << "] = " << got << ", reference " << ref);
    }
  if (pad > 0 && m > 0 && n > 0) CHECK(out[n] == -7.0f);
}

}  // namespace

// A build without oneDNN runs these as passes with a warning; tests/onednn_missing.cpp checks
// its messages.
#define REQUIRE_ONEDNN()                \
  if (!onednn::available()) {           \
    WARN("nabla built without oneDNN"); \
    return;                             \
  }

TEST_CASE("onednn: available in this build and describes itself", "[onednn]") {
  REQUIRE_ONEDNN();
  CHECK_NOTHROW(onednn::require("test"));
  CHECK(onednn::describe().find("oneDNN v") == 0);
}

TEST_CASE("onednn: bf16 matmul equals a float64 reference of the bf16 values", "[onednn]") {
  REQUIRE_ONEDNN();
  const std::vector<Bf16Case> cases = {
      {1, 1, 1, 1, false, false, 0, false},   {1, 1, 37, 64, false, true, 0, false},
      {1, 7, 5, 3, false, false, 0, false},   {1, 33, 17, 129, false, true, 3, false},
      {1, 16, 48, 31, true, false, 0, false}, {1, 9, 11, 13, true, true, 2, false},
      {3, 5, 7, 19, false, false, 0, false},  {4, 8, 6, 10, false, true, 1, true},
      {2, 64, 96, 80, false, true, 0, false},
  };
  for (const Bf16Case& c : cases) check_bf16(c);
}

TEST_CASE("onednn: bf16 matmul with k = 0 writes zeros, with m = 0 nothing", "[onednn]") {
  REQUIRE_ONEDNN();
  std::vector<float> out(6, 5.0f);
  onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, 2, 3, 0), nullptr, nullptr, out.data());
  CHECK(out == std::vector<float>(6, 0.0f));
  std::vector<float> untouched(1, 5.0f);
  onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, 0, 3, 4), nullptr, nullptr, untouched.data());
  CHECK(untouched[0] == 5.0f);
}

TEST_CASE("onednn: int8 linear equals the exact integer product, scaled", "[onednn]") {
  REQUIRE_ONEDNN();
  using A = onednn::Activation;
  check_int8(1, 1, 1, 0, false, A::None);
  check_int8(1, 9, 33, 128, true, A::None);  // one row
  check_int8(3, 5, 4, 3, true, A::None);
  check_int8(17, 33, 9, 255, true, A::ReLU, 5);  // odd sizes, padded rows
  check_int8(64, 48, 128, 77, false, A::GELU);
  check_int8(31, 20, 70, 12, true, A::GELUTanh, 1);
  check_int8(4, 6, 0, 9, true, A::None);  // k = 0: the bias alone
  check_int8(0, 6, 5, 9, true, A::None);  // no rows
}

TEST_CASE("onednn: int8 linear refuses scales that are not positive", "[onednn]") {
  REQUIRE_ONEDNN();
  onednn::Int8Linear p;
  p.m = 1, p.n = 1, p.k = 1, p.ldx = 1, p.ldc = 1, p.x_scale = 0.0f;
  uint8_t x = 1;
  int8_t w = 1;
  float s = 1.0f, out = 0.0f;
  CHECK_THROWS_WITH(onednn::linear_u8s8(p, &x, &w, &s, nullptr, &out),
                    Contains("x_scale must be > 0"));
  p.x_scale = 1.0f, s = -1.0f;
  CHECK_THROWS_WITH(onednn::linear_u8s8(p, &x, &w, &s, nullptr, &out),
                    Contains("w_scales[0] must be > 0"));
}

TEST_CASE("onednn: a repeated shape reuses its primitive; the cache is bounded LRU", "[onednn]") {
  REQUIRE_ONEDNN();
  onednn::clear_cache();
  auto run = [](int64_t m) {
    const auto a = random_bf16(m * 8, 3), b = random_bf16(8 * 4, 4);
    std::vector<float> c(m * 4);
    onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, m, 4, 8), a.data(), b.data(), c.data());
  };
  run(2);
  CHECK(onednn::cache_stats().misses == 1);
  run(2);
  CHECK(onednn::cache_stats().hits == 1);
  CHECK(onednn::cache_stats().misses == 1);
  onednn::set_cache_capacity(2);
  run(3);
  run(5);  // evicts m = 2, the least recently used
  CHECK(onednn::cache_stats().size == 2);
  run(3);
  CHECK(onednn::cache_stats().hits == 2);
  run(2);
  CHECK(onednn::cache_stats().misses == 4);
  CHECK_THROWS_AS(onednn::set_cache_capacity(0), ValueError);
  onednn::set_cache_capacity(128);
  onednn::clear_cache();
  CHECK(onednn::cache_stats().size == 0);
}

TEST_CASE("onednn: calls run on nabla's thread count (1 in deterministic mode)", "[onednn]") {
  REQUIRE_ONEDNN();
  ThreadsRestore restore;
  set_adaptive_threads(false);  // the machine's load must not change the count under test
  const auto a = random_bf16(16 * 16, 5);
  std::vector<float> c1(16 * 16), c2(16 * 16);
  set_num_threads(1);
  onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, 16, 16, 16), a.data(), a.data(), c1.data());
  CHECK(onednn::last_call_threads() == 1);
  set_num_threads(2);
  onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, 16, 16, 16), a.data(), a.data(), c2.data());
  CHECK(onednn::last_call_threads() == 2);
  CHECK(omp_get_max_threads() == 2);
  set_deterministic(true);
  onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, 16, 16, 16), a.data(), a.data(), c2.data());
  CHECK(onednn::last_call_threads() == 1);
  CHECK(c1 == c2);  // one thread both times: the same bits
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef REQUIRE_ONEDNN
