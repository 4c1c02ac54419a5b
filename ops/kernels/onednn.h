// The oneDNN backend: the low-precision matrix products OpenBLAS lacks (Debian's OpenBLAS 0.3.21
// has no bf16 GEMM and no int8 GEMM), run through oneDNN's matmul primitive. Plain C++ here; no
// oneDNN type leaves ops/kernels/onednn*.cpp.
//
// One engine for the process and a stream per calling thread; primitives are kept in a bounded LRU
// cache keyed by everything that shapes one (sizes, strides, transposes, data types, post-op,
// thread count), so a model's repeated shapes build each primitive once. oneDNN's OpenMP runtime
// runs each call on nabla's active thread count (core/parallel.h); in deterministic mode on one
// thread, so the result does not depend on the thread count.
//
// Built only with NABLA_WITH_ONEDNN (cmake/oneDNN.cmake). Without it available() is false and
// every kernel throws a nabla::Error that says oneDNN is missing and how to get it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nabla::onednn {

bool available();
// "oneDNN v2.6.3 (cpu runtime OpenMP)", or the sentence saying nabla was built without it.
std::string describe();
// Throws nabla::Error naming `what` (the public entry point) when oneDNN is missing.
void require(const char* what);

// C[b] = op(A[b]) op(B[b]) for b < batch: A and B hold bfloat16 bit patterns (the top half of a
// float32), C is float32; products accumulate in float32. op(A) is m x k: A is stored m x k with
// row stride lda, or (trans_a) k x m with row stride lda; likewise op(B), k x n. C is m x n with
// row stride ldc. The batch strides are in elements (0 repeats one matrix for every b).
struct Bf16Matmul {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0;
  // Dense operands: rows of length k (or m, n when transposed), matrices one after another.
  static Bf16Matmul dense(int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a = false,
                          bool trans_b = false);
};
void matmul_bf16(const Bf16Matmul& p, const uint16_t* a, const uint16_t* b, float* c);

// The activation applied to an int8 product's float32 output (a oneDNN post-op).
enum class Activation : uint8_t { None, ReLU, GELU, GELUTanh };

// The int8 linear map of dynamic quantisation (PyTorch's quantized::linear_dynamic):
//   C[i, j] = act(x_scale * w_scales[j] * sum_t (X[i, t] - x_zero_point) * W[j, t] + bias[j])
// X: m x k unsigned 8-bit activations, row stride ldx; W: n x k signed 8-bit weights, row-major
// (a Linear's (out, in) layout); w_scales: n; bias: n float32 or null; C: m x n float32, row
// stride ldc. The sum is exact (int32); the rest runs in float32 inside the product's kernel, in
// oneDNN's order: x_scale * (w_scales[j] * (sum + bias[j] / (x_scale * w_scales[j]))), then act.
struct Int8Linear {
  int64_t m = 0, n = 0, k = 0;
  int64_t ldx = 0, ldc = 0;
  float x_scale = 1.0f;
  int32_t x_zero_point = 0;
  Activation activation = Activation::None;
};
// The plain path: W is read in its row-major layout, which oneDNN repacks on every call.
void linear_u8s8(const Int8Linear& p, const uint8_t* x, const int8_t* w, const float* w_scales,
                 const float* bias, float* c);

// An int8 weight (n x k) and its per-row scales, packed once into the blocked layout oneDNN's
// int8 product reads (with the column sums its zero-point correction needs), so no call repacks
// it. The layout belongs to the primitive: a call whose primitive wants another one (another
// thread count or row count may) repacks once under a lock and counts it in repacks().
// Copies share the packed data; thread-safe.
enum class WeightLayout : uint8_t {
  Auto,     // Blocked, or RowMajor where blocking would grow the weight by over 25% (narrow layers)
  Blocked,  // the primitive's layout
  RowMajor,       // as given; every call's product repacks it (the plain path)
  StaleRowMajor,  // held row-major, but calls want Blocked: the first repacks (tests of repacking)
};
class PackedInt8Weights {
 public:
  PackedInt8Weights() = default;  // empty: n = k = 0
  // Throws nabla::Error when oneDNN is missing, ValueError for a scale that is not > 0.
  PackedInt8Weights(int64_t n, int64_t k, const int8_t* w, const float* w_scales,
                    WeightLayout layout = WeightLayout::Auto);
  int64_t n() const;
  int64_t k() const;
  const std::vector<float>& scales() const;
  std::vector<int8_t> unpack() const;  // the weight back in row-major n x k
  int64_t packed_bytes() const;        // the weight as held (padding and column sums included)
  bool blocked() const;                // calls read the blocked layout
  int64_t repacks() const;             // layout changes since packing
  struct State;                        // ops/kernels/onednn_int8.cpp

 private:
  friend void linear_u8s8(const Int8Linear&, const uint8_t*, const PackedInt8Weights&, const float*,
                          float*);
  std::shared_ptr<State> state_;
};
// C as above with W and w_scales from `w` (p.n == w.n(), p.k == w.k()). Bitwise equal to the
// plain path on the same values.
void linear_u8s8(const Int8Linear& p, const uint8_t* x, const PackedInt8Weights& w,
                 const float* bias, float* c);

// The float32 linear map of inference with a weight packed once (OpenBLAS has no packed-weight
// sgemm, so it re-packs a constant weight on every call):
//   C[i, j] = act(sum_t X[i, t] W[j, t] + bias[j])
// X: m x k float32, row stride ldx; W: the packed n x k weight; bias: n or null; C: m x n, row
// stride ldc. Bias and activation run inside the product's kernel (oneDNN post-ops).
struct F32Linear {
  int64_t m = 0, n = 0, k = 0;
  int64_t ldx = 0, ldc = 0;
  Activation activation = Activation::None;
};
// A float32 weight (n x k, row-major: a Linear's (out, in)) packed once into the blocked layout
// of oneDNN's f32 product, by nabla's loop over the layout's blocking descriptor (no reorder
// primitive) into nabla's allocator (live_bytes() counts it). As PackedInt8Weights: a call whose
// primitive wants another layout repacks once under a lock (counted in repacks()); copies share
// the data; thread-safe.
class PackedF32Weights {
 public:
  PackedF32Weights() = default;  // empty: n = k = 0
  // Throws nabla::Error when oneDNN is missing.
  PackedF32Weights(int64_t n, int64_t k, const float* w);
  int64_t n() const;
  int64_t k() const;
  int64_t packed_bytes() const;       // the weight as held (the layout's padding included)
  std::vector<float> unpack() const;  // the weight back in row-major n x k
  int64_t repacks() const;
  struct State;  // ops/kernels/onednn_f32.cpp

 private:
  friend void linear_f32(const F32Linear&, const float*, const PackedF32Weights&, const float*,
                         float*);
  std::shared_ptr<State> state_;
};
void linear_f32(const F32Linear& p, const float* x, const PackedF32Weights& w, const float* bias,
                float* c);

// C = alpha op(A) op(B) + beta C in float32, row-major, with cblas_sgemm's arguments, through
// oneDNN's own sgemm (dnnl_sgemm: its kernels follow the CPU's vector width). For machines where
// OpenBLAS runs narrower kernels than the CPU has (core/machine.h, onednn_sgemm_min_flop).
// `threaded`: oneDNN splits the call over nabla's active threads (1 in deterministic mode or
// inside a parallel region); otherwise one thread runs it.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           bool threaded);

// The primitive cache: hits and misses since the last clear, entries now, and the bound (512 at
// start: an int8 primitive holds its weight's scales, so a model needs one per quantised layer).
struct CacheStats {
  int64_t hits = 0, misses = 0, size = 0, capacity = 0;
};
CacheStats cache_stats();
void clear_cache();                  // also zeroes the counts
void set_cache_capacity(int64_t n);  // >= 1; drops the least recently used beyond it
// The OpenMP thread count oneDNN's last call ran with (0 before any call).
int last_call_threads();
// The oneDNN implementation the calling thread's last bf16 product ran, e.g.
// "brg:avx512_core_bf16" ("" before any, or without oneDNN). "ref:any" is oneDNN's reference
// loop, about 1000x slower: a layout it cannot run fast.
std::string last_bf16_implementation();

}  // namespace nabla::onednn
