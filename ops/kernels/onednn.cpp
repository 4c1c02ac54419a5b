// The oneDNN backend (ops/kernels/onednn.h says what and why): oneDNN 2.6's matmul primitive
// (https://oneapi-src.github.io/oneDNN/v2.6/dev_guide_matmul.html). Here the shared pieces
// (ops/kernels/onednn_backend.h), the bf16 product and, in a build without oneDNN, every entry
// point's error; the int8 product is in ops/kernels/onednn_int8.cpp.
#include "nabla/ops/kernels/onednn.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/core/parallel.h"

#if NABLA_WITH_ONEDNN
#include <omp.h>

#include <atomic>

#include "nabla/ops/kernels/onednn_backend.h"
#endif

namespace nabla::onednn {

Bf16Matmul Bf16Matmul::dense(int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a,
                             bool trans_b) {
  Bf16Matmul p;
  p.batch = batch, p.m = m, p.n = n, p.k = k, p.trans_a = trans_a, p.trans_b = trans_b;
  p.lda = trans_a ? m : k;
  p.ldb = trans_b ? k : n;
  p.ldc = n;
  p.batch_stride_a = m * k, p.batch_stride_b = k * n, p.batch_stride_c = m * n;
  return p;
}

#if !NABLA_WITH_ONEDNN

bool available() { return false; }
std::string describe() { return "not built with oneDNN"; }
void require(const char* what) {
  throw Error(fmt::format(
      "{}: nabla was built without oneDNN (NABLA_WITH_ONEDNN=OFF or libdnnl-dev missing when it "
      "was configured); install libdnnl-dev (scripts/setup.sh) and configure again",
      what));
}
void sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
           int64_t, float, float*, int64_t, bool) {
  require("onednn::sgemm");
}
void matmul_bf16(const Bf16Matmul&, const uint16_t*, const uint16_t*, float*) {
  require("onednn::matmul_bf16");
}
void linear_u8s8(const Int8Linear&, const uint8_t*, const int8_t*, const float*, const float*,
                 float*) {
  require("onednn::linear_u8s8");
}
struct PackedInt8Weights::State {};
PackedInt8Weights::PackedInt8Weights(int64_t, int64_t, const int8_t*, const float*, WeightLayout) {
  require("onednn::PackedInt8Weights");
}
int64_t PackedInt8Weights::n() const { return 0; }
int64_t PackedInt8Weights::k() const { return 0; }
const std::vector<float>& PackedInt8Weights::scales() const {
  static const std::vector<float> none;
  return none;
}
std::vector<int8_t> PackedInt8Weights::unpack() const { return {}; }
int64_t PackedInt8Weights::packed_bytes() const { return 0; }
int64_t PackedInt8Weights::repacks() const { return 0; }
bool PackedInt8Weights::blocked() const { return false; }
void linear_u8s8(const Int8Linear&, const uint8_t*, const PackedInt8Weights&, const float*,
                 float*) {
  require("onednn::linear_u8s8");
}
struct PackedF32Weights::State {};
PackedF32Weights::PackedF32Weights(int64_t, int64_t, const float*) {
  require("onednn::PackedF32Weights");
}
int64_t PackedF32Weights::n() const { return 0; }
int64_t PackedF32Weights::k() const { return 0; }
int64_t PackedF32Weights::packed_bytes() const { return 0; }
std::vector<float> PackedF32Weights::unpack() const { return {}; }
int64_t PackedF32Weights::repacks() const { return 0; }
void linear_f32(const F32Linear&, const float*, const PackedF32Weights&, const float*, float*) {
  require("onednn::linear_f32");
}
CacheStats cache_stats() { return {}; }
void clear_cache() {}
void set_cache_capacity(int64_t) {}
int last_call_threads() { return 0; }
std::string last_bf16_implementation() { return ""; }

#else

namespace backend {

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}
PrimitiveCache& cache() {
  static PrimitiveCache c;
  return c;
}

namespace {
std::atomic<int> last_threads{0};
}

void check_sizes(const char* what, std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes)
    if (v < 0) throw ValueError(fmt::format("{}: negative size or stride {}", what, v));
}

int prepare_threads() {
  const int want = omp_in_parallel() ? 1 : deterministic() ? 1 : active_threads();
  if (!omp_in_parallel() && omp_get_max_threads() != want) omp_set_num_threads(want);
  last_threads.store(want, std::memory_order_relaxed);
  return want;
}

}  // namespace backend

using namespace backend;

bool available() { return true; }

std::string describe() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN v{}.{}.{} (cpu runtime {})", v->major, v->minor, v->patch,
                     v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
}

void require(const char*) {}

thread_local std::string last_bf16_impl;

void matmul_bf16(const Bf16Matmul& p, const uint16_t* a, const uint16_t* b, float* c) {
  constexpr const char* what = "onednn::matmul_bf16";
  check_sizes(what, {p.batch, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch_stride_a,
                     p.batch_stride_b, p.batch_stride_c});
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  if (p.k == 0) {  // an empty sum: zeros (oneDNN does not take zero-sized dims)
    for (int64_t i = 0; i < p.batch; ++i)
      for (int64_t r = 0; r < p.m; ++r)
        std::fill_n(c + i * p.batch_stride_c + r * p.ldc, p.n, 0.0f);
    return;
  }
  const int threads = prepare_threads();
  // A batch stride of 0 is one matrix for every batch entry: oneDNN broadcasts a batch dim of 1.
  const int64_t ba = p.batch_stride_a == 0 ? 1 : p.batch, bb = p.batch_stride_b == 0 ? 1 : p.batch;
  const Key key{1,
                p.batch,
                p.m,
                p.n,
                p.k,
                p.trans_a,
                p.trans_b,
                p.lda,
                p.ldb,
                p.ldc,
                ba == 1 ? 0 : p.batch_stride_a,
                bb == 1 ? 0 : p.batch_stride_b,
                p.batch_stride_c,
                threads,
                0,
                0};
  // A batch dim of 1 gets the stride of a dense stack: with 0 there, oneDNN reads the layout as
  // batch-innermost ("bca") and only its reference kernel takes that, at ~1 s per product.
  const int64_t stride_a = ba == 1 ? (p.trans_a ? p.k : p.m) * p.lda : p.batch_stride_a;
  const int64_t stride_b = bb == 1 ? (p.trans_b ? p.n : p.k) * p.ldb : p.batch_stride_b;
  const int64_t stride_c = p.batch == 1 ? p.m * p.ldc : p.batch_stride_c;
  const memory::desc a_md(dims({ba, p.m, p.k}), dt::bf16,
                          p.trans_a ? dims({stride_a, 1, p.lda}) : dims({stride_a, p.lda, 1}));
  const memory::desc b_md(dims({bb, p.k, p.n}), dt::bf16,
                          p.trans_b ? dims({stride_b, 1, p.ldb}) : dims({stride_b, p.ldb, 1}));
  const memory::desc c_md(dims({p.batch, p.m, p.n}), dt::f32, dims({stride_c, p.ldc, 1}));
  const std::string shapes =
      fmt::format("batch {} x ({} x {}) @ ({} x {})", p.batch, p.m, p.k, p.k, p.n);
  translate_errors(what, shapes, [&] {
    const auto make = [&] {
      const dnnl::matmul::desc desc(a_md, b_md, c_md);
      return Entry{dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine())), b_md, {}};
    };
    const dnnl::primitive prim = cache().get(key, make).prim;
    const char* impl = nullptr;
    dnnl_primitive_desc_query(prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl);
    if (impl && last_bf16_impl != impl) last_bf16_impl = impl;
    memory am(a_md, engine(), const_cast<uint16_t*>(a)),
        bm(b_md, engine(), const_cast<uint16_t*>(b)), cm(c_md, engine(), c);
    prim.execute(stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream().wait();
  });
}

CacheStats cache_stats() { return cache().stats(); }
void clear_cache() { cache().clear(); }
void set_cache_capacity(int64_t n) {
  if (n < 1)
    throw ValueError(fmt::format("onednn::set_cache_capacity: capacity must be >= 1, got {}", n));
  cache().set_capacity(n);
}
int last_call_threads() { return backend::last_threads.load(std::memory_order_relaxed); }
std::string last_bf16_implementation() { return last_bf16_impl; }

#endif

}  // namespace nabla::onednn
