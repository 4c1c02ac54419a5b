// The oneDNN backend (ops/kernels/onednn.h): the bf16 and int8 products against float64
// references computed from the same low-precision values, packed int8 weights against the plain
// path, the primitive cache and the thread count. Without oneDNN every entry point must say so
// (tests/onednn_missing.cpp).
#include "nabla/ops/kernels/onednn.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "nabla/core/autocast.h"
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

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
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
  // The packed weight gives the plain path's bits (the same kernel, the same int32 sums).
  const onednn::PackedInt8Weights packed(n, k, w.data(), scales.data());
  CHECK(packed.unpack() == std::vector<int8_t>(w.begin(), w.begin() + n * k));
  std::vector<float> out_packed(out.size(), -7.0f);
  onednn::linear_u8s8(p, x.data(), packed, bias_ptr, out_packed.data());
  CHECK(same_bits(out_packed, out));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double ref = int8_reference(p, x, w, scales, bias_ptr, i, j);
      // Exact int32 sum; the scaling, the bias and the activation round in float32.
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

TEST_CASE("onednn: bf16 products of every layout autocast uses run a fast kernel", "[onednn]") {
  REQUIRE_ONEDNN();
  // A batch of 1 once had stride 0 in its memory descriptor, which oneDNN took for a
  // batch-innermost layout that only its reference loop ran (~1 s per product).
  if (!autocast::cpu_has_native_bf16()) {
    WARN("no native bf16 on this CPU: oneDNN's bf16 kernels are not expected");
    return;
  }
  const int64_t m = 64, n = 48, k = 32;
  std::vector<uint16_t> a(static_cast<size_t>(4 * m * k), 0x3f80), b(a.size(), 0x3f80);
  std::vector<float> c(static_cast<size_t>(4 * m * n));
  for (const int64_t batch : {1, 4})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const bool shared_b : {false, true}) {
          onednn::Bf16Matmul p = onednn::Bf16Matmul::dense(batch, m, n, k, ta, tb);
          if (shared_b) p.batch_stride_b = 0;
          onednn::matmul_bf16(p, a.data(), b.data(), c.data());
          INFO("batch " << batch << " trans_a " << ta << " trans_b " << tb << " shared B "
                        << shared_b);
          CHECK(onednn::last_bf16_implementation().rfind("ref", 0) != 0);
          CHECK(c[0] == static_cast<float>(k));  // ones times ones
        }
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
  onednn::set_cache_capacity(512);
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

namespace {

// A random int8 product (dense rows) with its plain-path result.
struct Int8Problem {
  onednn::Int8Linear p;
  std::vector<uint8_t> x;
  std::vector<int8_t> w;
  std::vector<float> scales, bias;

  Int8Problem(int64_t m, int64_t n, int64_t k, uint32_t seed)
      : x(m * k), w(n * k), scales(n), bias(n) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> u8(0, 255), s8(-127, 127);
    std::uniform_real_distribution<float> pos(0.001f, 0.02f), any(-3.0f, 3.0f);
    p.m = m, p.n = n, p.k = k, p.ldx = k, p.ldc = n, p.x_scale = 0.05f, p.x_zero_point = 10;
    for (auto& v : x) v = static_cast<uint8_t>(u8(gen));
    for (auto& v : w) v = static_cast<int8_t>(s8(gen));
    for (auto& v : scales) v = pos(gen);
    for (auto& v : bias) v = any(gen);
  }
  std::vector<float> plain() const {
    std::vector<float> c(p.m * p.n);
    onednn::linear_u8s8(p, x.data(), w.data(), scales.data(), bias.data(), c.data());
    return c;
  }
  std::vector<float> packed(const onednn::PackedInt8Weights& pw) const {
    std::vector<float> c(p.m * p.n);
    onednn::linear_u8s8(p, x.data(), pw, bias.data(), c.data());
    return c;
  }
};

}  // namespace

TEST_CASE("onednn: packed int8 weights in every layout give the plain path's bits", "[onednn]") {
  REQUIRE_ONEDNN();
  using L = onednn::WeightLayout;
  // Blocked pads n and k to multiples of 64: Auto keeps 70 x 45 row-major and blocks 128 x 192.
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{70, 45}, {128, 192}}) {
    const Int8Problem a(33, n, k, 21);
    const std::vector<float> expected = a.plain();
    for (L layout : {L::Auto, L::Blocked, L::RowMajor}) {
      CAPTURE(n, k, static_cast<int>(layout));
      const onednn::PackedInt8Weights w(n, k, a.w.data(), a.scales.data(), layout);
      CHECK(same_bits(a.packed(w), expected));
      CHECK(w.unpack() == a.w);
      CHECK(w.repacks() == 0);
      CHECK(w.scales() == a.scales);
      if (layout == L::RowMajor) CHECK(w.packed_bytes() == n * k);
      // Blocked, with room for oneDNN's column sums: more than the row-major bytes.
      if (layout == L::Blocked) CHECK(w.packed_bytes() > n * k);
      CHECK(w.blocked() == (layout == L::Blocked || (layout == L::Auto && n == 128)));
    }
  }
  // Held row-major while the calls want the blocked layout: the first call repacks, once.
  const Int8Problem a(33, 128, 96, 22);
  const onednn::PackedInt8Weights stale(a.p.n, a.p.k, a.w.data(), a.scales.data(),
                                        L::StaleRowMajor);
  CHECK(stale.packed_bytes() == a.p.n * a.p.k);
  CHECK(stale.repacks() == 0);
  CHECK(same_bits(a.packed(stale), a.plain()));
  CHECK(stale.repacks() == 1);
  CHECK(stale.packed_bytes() > a.p.n * a.p.k);
  const onednn::PackedInt8Weights copy = stale;  // copies share the packed data
  CHECK(same_bits(a.packed(copy), a.plain()));
  CHECK(stale.repacks() == 1);
  CHECK(stale.unpack() == a.w);
}

TEST_CASE("onednn: one int8 primitive serves every batch's scale and zero point", "[onednn]") {
  REQUIRE_ONEDNN();
  ThreadsRestore restore;
  set_adaptive_threads(false);  // a thread count that changes would make another primitive
  Int8Problem a(40, 64, 96, 22);
  const onednn::PackedInt8Weights packed(a.p.n, a.p.k, a.w.data(), a.scales.data());
  onednn::clear_cache();
  const std::vector<std::pair<float, int32_t>> quantisations = {
      {0.05f, 10}, {0.7f, 0}, {1e-4f, 255}, {0.013f, 128}};
  for (const auto& [scale, zero_point] : quantisations) {
    CAPTURE(scale, zero_point);
    a.p.x_scale = scale, a.p.x_zero_point = zero_point;
    const std::vector<float> got = a.packed(packed);
    for (int64_t i = 0; i < a.p.m; i += 13)
      for (int64_t j = 0; j < a.p.n; j += 7) {
        const double ref = int8_reference(a.p, a.x, a.w, a.scales, a.bias.data(), i, j);
        CHECK(std::fabs(got[i * a.p.n + j] - ref) <= 1e-5 * (std::fabs(ref) + 3.0));
      }
  }
  // Four calls, four scales and zero points: one primitive made, three reuses.
  CHECK(onednn::cache_stats().misses == 1);
  CHECK(onednn::cache_stats().hits == 3);
  CHECK(onednn::cache_stats().size == 1);
}

TEST_CASE("onednn: packed int8 results survive a thread-count change", "[onednn]") {
  REQUIRE_ONEDNN();
  ThreadsRestore restore;
  set_adaptive_threads(false);
  const Int8Problem a(256, 192, 160, 23);
  const onednn::PackedInt8Weights packed(a.p.n, a.p.k, a.w.data(), a.scales.data());
  set_num_threads(1);
  const std::vector<float> one = a.packed(packed), plain_one = a.plain();
  CHECK(onednn::last_call_threads() == 1);
  set_num_threads(2);
  onednn::clear_cache();
  const std::vector<float> two = a.packed(packed);
  CHECK(onednn::last_call_threads() == 2);
  CHECK(onednn::cache_stats().misses == 1);  // a primitive for the new thread count
  // Exact int32 sums and the same per-element post-ops: the same bits on 1 and 2 threads, and
  // the plain path's. A layout change would have repacked (counted), never given other values.
  CAPTURE(packed.repacks());
  CHECK(same_bits(one, plain_one));
  CHECK(same_bits(two, one));
  CHECK(same_bits(a.plain(), two));
}

TEST_CASE("onednn: packed int8 weights refuse bad scales and mismatched products", "[onednn]") {
  REQUIRE_ONEDNN();
  const std::vector<int8_t> w(6, 1);
  const std::vector<float> good(3, 0.5f), bad = {0.5f, 0.0f, 0.5f};
  CHECK_THROWS_WITH(onednn::PackedInt8Weights(3, 2, w.data(), bad.data()),
                    Contains("w_scales[1] must be > 0"));
  CHECK_THROWS_AS(onednn::PackedInt8Weights(-1, 2, w.data(), good.data()), ValueError);
  const onednn::PackedInt8Weights packed(3, 2, w.data(), good.data());
  onednn::Int8Linear p;
  p.m = 1, p.n = 3, p.k = 4, p.ldx = 4, p.ldc = 3;
  std::vector<uint8_t> x(4, 1);
  std::vector<float> c(3);
  CHECK_THROWS_WITH(onednn::linear_u8s8(p, x.data(), packed, nullptr, c.data()),
                    Contains("onednn::linear_u8s8") && Contains("packed weight is 3 x 2"));
  CHECK_THROWS_AS(onednn::linear_u8s8(p, x.data(), onednn::PackedInt8Weights(), nullptr, c.data()),
                  ShapeError);
  // An empty weight (k = 0): the bias alone, as the plain path.
  const onednn::PackedInt8Weights no_inputs(3, 0, nullptr, good.data());
  CHECK(no_inputs.packed_bytes() == 0);
  CHECK(no_inputs.unpack().empty());
  p.k = 0, p.ldx = 0;
  const std::vector<float> bias = {1.0f, -2.0f, 3.0f};
  onednn::linear_u8s8(p, x.data(), no_inputs, bias.data(), c.data());
  CHECK(c == bias);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef REQUIRE_ONEDNN
