// The oneDNN backend (ops/kernels/onednn.h says what and why). oneDNN 2.6's matmul primitive
// (https://oneapi-src.github.io/oneDNN/v2.6/dev_guide_matmul.html) with attributes for the int8
// quantisation parameters: runtime output scales and a runtime source zero point
// (dev_guide_attributes_quantization.html), so one primitive serves every batch's scale.
#include "nabla/ops/kernels/onednn.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/core/parallel.h"

#if NABLA_WITH_ONEDNN
#include <omp.h>

#include <array>
#include <atomic>
#include <list>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
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
void matmul_bf16(const Bf16Matmul&, const uint16_t*, const uint16_t*, float*) {
  require("onednn::matmul_bf16");
}
void linear_u8s8(const Int8Linear&, const uint8_t*, const int8_t*, const float*, const float*,
                 float*) {
  require("onednn::linear_u8s8");
}
CacheStats cache_stats() { return {}; }
void clear_cache() {}
void set_cache_capacity(int64_t) {}
int last_call_threads() { return 0; }

#else

namespace {
using dnnl::memory;
using dt = memory::data_type;

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
// Streams are not meant to be shared between threads; one per calling thread, on the one engine.
dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Everything a primitive depends on, as numbers: kind, sizes, strides, flags, threads.
using Key = std::array<int64_t, 16>;

class PrimitiveCache {
 public:
  template <class Make>
  dnnl::primitive get(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first != key) continue;
      entries_.splice(entries_.begin(), entries_, it);  // most recently used first
      ++hits_;
      return entries_.front().second;
    }
    ++misses_;
    entries_.emplace_front(key, make());
    trim();
    return entries_.front().second;
  }
  CacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, misses_, static_cast<int64_t>(entries_.size()), capacity_};
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
    hits_ = misses_ = 0;
  }
  void set_capacity(int64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = n;
    trim();
  }

 private:
  void trim() {
    while (static_cast<int64_t>(entries_.size()) > capacity_) entries_.pop_back();
  }
  std::mutex mutex_;
  // A model has a few dozen distinct shapes; a linear search over this list costs far less than
  // the product it finds.
  std::list<std::pair<Key, dnnl::primitive> > entries_;
  int64_t hits_ = 0, misses_ = 0, capacity_ = 128;
};

PrimitiveCache& cache() {
  static PrimitiveCache c;
  return c;
}

std::atomic<int> last_threads{0};

void check_sizes(const char* what, std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes)
    if (v < 0) throw ValueError(fmt::format("{}: negative size or stride {}", what, v));
}

// oneDNN's OpenMP runtime splits a call over omp_get_max_threads(): make that nabla's active
// count (the one core free under load), or 1 in deterministic mode. Part of the key: some
// implementations fix their split when the primitive is made.
int prepare_threads() {
  const int want = omp_in_parallel() ? 1 : deterministic() ? 1 : active_threads();
  if (!omp_in_parallel() && omp_get_max_threads() != want) omp_set_num_threads(want);
  last_threads.store(want, std::memory_order_relaxed);
  return want;
}

template <class F>
void translate_errors(const char* what, const std::string& shapes, F&& f) {
  try {
    f();
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("{}: oneDNN failed on {}: {}", what, shapes, e.what()));
  }
}

memory::dims dims(std::initializer_list<int64_t> v) { return memory::dims(v); }

}  // namespace

bool available() { return true; }

std::string describe() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN v{}.{}.{} (cpu runtime {})", v->major, v->minor, v->patch,
                     v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
}

void require(const char*) {}

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
  const memory::desc a_md(
      dims({ba, p.m, p.k}), dt::bf16,
      p.trans_a ? dims({p.batch_stride_a, 1, p.lda}) : dims({p.batch_stride_a, p.lda, 1}));
  const memory::desc b_md(
      dims({bb, p.k, p.n}), dt::bf16,
      p.trans_b ? dims({p.batch_stride_b, 1, p.ldb}) : dims({p.batch_stride_b, p.ldb, 1}));
  const memory::desc c_md(dims({p.batch, p.m, p.n}), dt::f32, dims({p.batch_stride_c, p.ldc, 1}));
  const std::string shapes =
      fmt::format("batch {} x ({} x {}) @ ({} x {})", p.batch, p.m, p.k, p.k, p.n);
  translate_errors(what, shapes, [&] {
    dnnl::primitive prim = cache().get(key, [&] {
      return dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine()));
    });
    memory am(a_md, engine(), const_cast<uint16_t*>(a)),
        bm(b_md, engine(), const_cast<uint16_t*>(b)), cm(c_md, engine(), c);
    prim.execute(stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream().wait();
  });
}

void linear_u8s8(const Int8Linear& p, const uint8_t* x, const int8_t* w, const float* w_scales,
                 const float* bias, float* c) {
  constexpr const char* what = "onednn::linear_u8s8";
  check_sizes(what, {p.m, p.n, p.k, p.ldx, p.ldc});
  if (!(p.x_scale > 0.0f))
    throw ValueError(fmt::format("{}: x_scale must be > 0, got {}", what, p.x_scale));
  for (int64_t j = 0; j < p.n; ++j)
    if (!(w_scales[j] > 0.0f))
      throw ValueError(fmt::format("{}: w_scales[{}] must be > 0, got {}", what, j, w_scales[j]));
  if (p.m == 0 || p.n == 0) return;
  // The product's scale per output column. oneDNN 2.6 adds the bias before the output scale
  // (dst = scale * (acc + bias), checked by tests/ops/test_onednn.cpp), so the bias goes in
  // divided by it.
  std::vector<float> scales(p.n), scaled_bias(bias ? p.n : 0);
  for (int64_t j = 0; j < p.n; ++j) {
    scales[j] = p.x_scale * w_scales[j];
    if (bias) scaled_bias[j] = bias[j] / scales[j];
  }
  if (p.k == 0) {  // an empty sum: act(bias)
    std::vector<uint8_t> one_x(p.m, 0);
    std::vector<int8_t> zero_w(p.n, 0);
    Int8Linear q = p;
    q.k = 1, q.ldx = 1, q.x_zero_point = 0;
    linear_u8s8(q, one_x.data(), zero_w.data(), w_scales, bias, c);
    return;
  }
  const int threads = prepare_threads();
  const Key key{2,
                p.m,
                p.n,
                p.k,
                p.ldx,
                p.ldc,
                bias != nullptr,
                static_cast<int64_t>(p.activation),
                threads,
                0,
                0,
                0,
                0,
                0,
                0,
                0};
  const memory::desc x_md(dims({p.m, p.k}), dt::u8, dims({p.ldx, 1}));
  const memory::desc w_md(dims({p.k, p.n}), dt::s8, dims({1, p.k}));  // W^T, read in place
  const memory::desc bias_md(dims({1, p.n}), dt::f32, dims({p.n, 1}));
  const memory::desc c_md(dims({p.m, p.n}), dt::f32, dims({p.ldc, 1}));
  const memory::desc scales_md(dims({p.n}), dt::f32, dims({1}));
  const memory::desc zp_md(dims({1}), dt::s32, dims({1}));
  const std::string shapes = fmt::format("({} x {}) u8 @ ({} x {})^T s8", p.m, p.k, p.n, p.k);
  translate_errors(what, shapes, [&] {
    dnnl::primitive prim = cache().get(key, [&] {
      dnnl::primitive_attr attr;
      attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      if (p.activation != Activation::None) {
        const dnnl::algorithm alg = p.activation == Activation::ReLU ? dnnl::algorithm::eltwise_relu
                                    : p.activation == Activation::GELU
                                        ? dnnl::algorithm::eltwise_gelu_erf
                                        : dnnl::algorithm::eltwise_gelu_tanh;
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, alg, 0.0f, 0.0f);
        attr.set_post_ops(ops);
      }
      const auto desc = bias ? dnnl::matmul::desc(x_md, w_md, bias_md, c_md)
                             : dnnl::matmul::desc(x_md, w_md, c_md);
      return dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine()));
    });
    int32_t zero_point = p.x_zero_point;
    memory xm(x_md, engine(), const_cast<uint8_t*>(x)), wm(w_md, engine(), const_cast<int8_t*>(w)),
        cm(c_md, engine(), c), sm(scales_md, engine(), scales.data()),
        zm(zp_md, engine(), &zero_point);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm},
                                         {DNNL_ARG_WEIGHTS, wm},
                                         {DNNL_ARG_DST, cm},
                                         {DNNL_ARG_ATTR_OUTPUT_SCALES, sm},
                                         {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zm}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(bias_md, engine(), scaled_bias.data()));
    prim.execute(stream(), args);
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
int last_call_threads() { return last_threads.load(std::memory_order_relaxed); }

#endif

}  // namespace nabla::onednn
