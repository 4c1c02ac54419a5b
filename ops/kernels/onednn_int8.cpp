// The int8 product of the oneDNN backend (ops/kernels/onednn.h): oneDNN 2.6's matmul
// (https://oneapi-src.github.io/oneDNN/v2.6/dev_guide_matmul.html), u8 activations x s8 weights,
// run by its brgemm implementation (brg:avx512_core_vnni here, AMX where there is one). What
// changes per call is given at execution, so one primitive per weight serves every batch: a
// runtime source zero point (dev_guide_attributes_quantization.html) and the batch's scale as a
// one-element binary post-op (dev_guide_attributes_post_ops.html). The weight's own per-column
// scales are output scales fixed in the primitive: 2.6's brgemm takes no runtime output scales
// (they send the call to the slower gemm:jit), and per-column binary post-ops cost ~40% of the
// product on the encoder's shapes. ONEDNN_VERBOSE=1 names the implementation each call runs.
#if NABLA_WITH_ONEDNN
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/kernels/onednn_backend.h"

namespace nabla::onednn {

using namespace backend;

namespace {

memory::desc row_md(int64_t n) { return memory::desc(dims({1, n}), dt::f32, dims({n, 1})); }
memory::desc scalar_md() { return memory::desc(dims({1, 1}), dt::f32, dims({1, 1})); }

// FNV-1a over the scales' bytes: the scales are part of an int8 primitive, so of its key.
int64_t scales_hash(const float* s, int64_t n) {
  uint64_t h = 14695981039346656037ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(s);
  for (int64_t i = 0; i < n * static_cast<int64_t>(sizeof(float)); ++i)
    h = (h ^ bytes[i]) * 1099511628211ull;
  return static_cast<int64_t>(h);
}

// C = act(x_scale * (w_scales[j] * ((X - zp) W^T + bias'))) with bias' = bias / (x_scale *
// w_scales[j]): oneDNN adds the bias before the output scales (dev_guide_matmul.html). The
// weight's scales are made into the primitive (brgemm takes only those); the zero point, the
// batch's x_scale (a one-element binary post-op) and the bias are given at execution.
dnnl::matmul::primitive_desc int8_primitive_desc(const Int8Linear& p, const float* w_scales,
                                                 bool has_bias, bool packed) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, std::vector<float>(w_scales, w_scales + p.n));
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  dnnl::post_ops ops;
  ops.append_binary(dnnl::algorithm::binary_mul, scalar_md());
  if (p.activation != Activation::None) ops.append_eltwise(1.0f, eltwise_of(p.activation), 0, 0);
  attr.set_post_ops(ops);
  const memory::desc x_md(dims({p.m, p.k}), dt::u8, dims({p.ldx, 1}));
  const memory::desc c_md(dims({p.m, p.n}), dt::f32, dims({p.ldc, 1}));
  const memory::desc w_md = linear_weights_md(p.n, p.k, dt::s8, packed);
  const auto desc = has_bias ? dnnl::matmul::desc(x_md, w_md, row_md(p.n), c_md)
                             : dnnl::matmul::desc(x_md, w_md, c_md);
  return dnnl::matmul::primitive_desc(desc, attr, engine());
}

// The primitive for this product and these weight scales (hash: scales_hash of them).
Entry int8_entry(const Int8Linear& p, const std::vector<float>& w_scales, int64_t hash,
                 bool has_bias, bool packed, int threads) {
  const Key key{
      2,       p.m,    p.n,  p.k, p.ldx, p.ldc, has_bias, static_cast<int64_t>(p.activation),
      threads, packed, hash, 0,   0,     0,     0,        0};
  return cache().get(
      key,
      [&] {
        const auto pd = int8_primitive_desc(p, w_scales.data(), has_bias, packed);
        return Entry{dnnl::matmul(pd), pd.weights_desc(), w_scales};
      },
      &w_scales);
}

void check_int8(const char* what, const Int8Linear& p) {
  check_sizes(what, {p.m, p.n, p.k, p.ldx, p.ldc});
  if (!(p.x_scale > 0.0f))
    throw ValueError(fmt::format("{}: x_scale must be > 0, got {}", what, p.x_scale));
}
void check_scales(const char* what, const float* w_scales, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    if (!(w_scales[j] > 0.0f))
      throw ValueError(fmt::format("{}: w_scales[{}] must be > 0, got {}", what, j, w_scales[j]));
}

// k = 0, an empty sum: act(bias) (oneDNN takes no zero-sized dim), as a product with k = 1 and
// a zero weight.
void int8_empty_sum(const Int8Linear& p, const float* w_scales, const float* bias, float* c) {
  const std::vector<uint8_t> zero_x(p.m, 0);
  const std::vector<int8_t> zero_w(p.n, 0);
  Int8Linear q = p;
  q.k = 1, q.ldx = 1, q.x_zero_point = 0;
  linear_u8s8(q, zero_x.data(), zero_w.data(), w_scales, bias, c);
}

void run_int8(const char* what, const Int8Linear& p, const dnnl::primitive& prim, const memory& w,
              const float* w_scales, const float* bias, float* c, const uint8_t* x) {
  std::vector<float> scaled_bias(bias ? p.n : 0);  // bias' above
  for (int64_t j = 0; j < static_cast<int64_t>(scaled_bias.size()); ++j)
    scaled_bias[j] = bias[j] / (p.x_scale * w_scales[j]);
  int32_t zero_point = p.x_zero_point;
  float x_scale = p.x_scale;
  const memory::desc x_md(dims({p.m, p.k}), dt::u8, dims({p.ldx, 1}));
  const memory::desc c_md(dims({p.m, p.n}), dt::f32, dims({p.ldc, 1}));
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(x_md, engine(), const_cast<uint8_t*>(x))},
      {DNNL_ARG_WEIGHTS, w},
      {DNNL_ARG_DST, memory(c_md, engine(), c)},
      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
       memory(memory::desc(dims({1}), dt::s32, dims({1})), engine(), &zero_point)},
      {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
       memory(scalar_md(), engine(), &x_scale)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(row_md(p.n), engine(), scaled_bias.data()));
  const std::string shapes = fmt::format("({} x {}) u8 @ ({} x {})^T s8", p.m, p.k, p.n, p.k);
  translate_errors(what, shapes, [&] {
    prim.execute(stream(), args);
    stream().wait();
  });
}

// A plain (k x n, strides {1, k}) view of a row-major weight, as the source or target of a
// reorder.
memory plain_weights(int64_t n, int64_t k, const int8_t* w) {
  return memory(linear_weights_md(n, k, dt::s8, false), engine(), const_cast<int8_t*>(w));
}
memory reorder_to(const memory& from, const memory::desc& md) {
  memory to(md, engine());
  dnnl::reorder(from, to).execute(stream(), const_cast<memory&>(from), to);
  stream().wait();
  return to;
}

}  // namespace

void linear_u8s8(const Int8Linear& p, const uint8_t* x, const int8_t* w, const float* w_scales,
                 const float* bias, float* c) {
  constexpr const char* what = "onednn::linear_u8s8";
  check_int8(what, p);
  check_scales(what, w_scales, p.n);
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) return int8_empty_sum(p, w_scales, bias, c);
  const int threads = prepare_threads();
  const std::vector<float> scales(w_scales, w_scales + p.n);
  dnnl::primitive prim;
  translate_errors(what, fmt::format("({} x {}) u8 @ ({} x {})^T s8", p.m, p.k, p.n, p.k), [&] {
    prim = int8_entry(p, scales, scales_hash(w_scales, p.n), bias != nullptr, false, threads).prim;
  });
  run_int8(what, p, prim, plain_weights(p.n, p.k, w), w_scales, bias, c, x);
}

// The packed weight: its layout (the one the last primitive wanted) is replaced, never changed,
// so a call holds the one it runs with while another thread repacks.
struct PackedInt8Weights::State {
  struct Layout {
    memory::desc md;
    memory data;
  };
  int64_t n = 0, k = 0;
  std::vector<float> scales;
  int64_t hash = 0;     // scales_hash(scales)
  bool blocked = true;  // calls run the primitive that reads the blocked layout
  std::mutex mutex;
  std::shared_ptr<const Layout> layout;  // null when n or k is 0
  int64_t repacks = 0;

  std::shared_ptr<const Layout> current() {
    std::lock_guard<std::mutex> lock(mutex);
    return layout;
  }
  // The layout `md`, repacked through the row-major weight when it is not the current one.
  std::shared_ptr<const Layout> in_layout(const memory::desc& md) {
    std::lock_guard<std::mutex> lock(mutex);
    if (layout->md == md) return layout;
    std::vector<int8_t> rows(n * k);
    memory plain = plain_weights(n, k, rows.data());
    dnnl::reorder(layout->data, plain).execute(stream(), const_cast<memory&>(layout->data), plain);
    stream().wait();
    layout = std::make_shared<const Layout>(Layout{md, reorder_to(plain, md)});
    ++repacks;
    return layout;
  }
};

// The layout is asked of a primitive for this many rows; every row count tried on oneDNN 2.6
// (1 to 4096) gets the same one, and a call that differs repacks.
constexpr int64_t kPackRows = 512;
// WeightLayout::Auto keeps a weight row-major when blocking would make it larger than this many
// times its n x k bytes: narrow layers, whose columns the blocked layout pads to a multiple of 64.
constexpr double kMaxBlockedGrowth = 1.25;

PackedInt8Weights::PackedInt8Weights(int64_t n, int64_t k, const int8_t* w, const float* w_scales,
                                     WeightLayout layout) {
  constexpr const char* what = "onednn::PackedInt8Weights";
  check_sizes(what, {n, k});
  check_scales(what, w_scales, n);
  state_ = std::make_shared<State>();
  state_->n = n, state_->k = k;
  state_->scales.assign(w_scales, w_scales + n);
  state_->hash = scales_hash(w_scales, n);
  if (n == 0 || k == 0) return;
  prepare_threads();
  translate_errors(what, fmt::format("weight ({} x {}) s8", n, k), [&] {
    const memory plain = plain_weights(n, k, w);
    memory::desc md = plain.get_desc();
    if (layout == WeightLayout::Auto || layout == WeightLayout::Blocked) {
      Int8Linear p;
      p.m = kPackRows, p.n = n, p.k = k, p.ldx = k, p.ldc = n;
      const memory::desc blocked = int8_primitive_desc(p, w_scales, false, true).weights_desc();
      const bool too_big =
          static_cast<double>(blocked.get_size()) > kMaxBlockedGrowth * static_cast<double>(n * k);
      if (layout == WeightLayout::Blocked || !too_big) md = blocked;
    }
    state_->blocked = layout == WeightLayout::StaleRowMajor || md != plain.get_desc();
    state_->layout =
        std::make_shared<const State::Layout>(State::Layout{md, reorder_to(plain, md)});
  });
}

int64_t PackedInt8Weights::n() const { return state_ ? state_->n : 0; }
int64_t PackedInt8Weights::k() const { return state_ ? state_->k : 0; }
const std::vector<float>& PackedInt8Weights::scales() const {
  static const std::vector<float> none;
  return state_ ? state_->scales : none;
}
std::vector<int8_t> PackedInt8Weights::unpack() const {
  const auto layout = state_ ? state_->current() : nullptr;
  if (!layout) return {};
  std::vector<int8_t> rows(state_->n * state_->k);
  translate_errors("onednn::PackedInt8Weights::unpack", "the packed weight", [&] {
    memory plain = plain_weights(state_->n, state_->k, rows.data());
    dnnl::reorder(layout->data, plain).execute(stream(), const_cast<memory&>(layout->data), plain);
    stream().wait();
  });
  return rows;
}
int64_t PackedInt8Weights::packed_bytes() const {
  const auto layout = state_ ? state_->current() : nullptr;
  return layout ? static_cast<int64_t>(layout->md.get_size()) : 0;
}
bool PackedInt8Weights::blocked() const { return state_ && state_->blocked; }
int64_t PackedInt8Weights::repacks() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->repacks;
}

void linear_u8s8(const Int8Linear& p, const uint8_t* x, const PackedInt8Weights& w,
                 const float* bias, float* c) {
  constexpr const char* what = "onednn::linear_u8s8";
  check_int8(what, p);
  check_packed_weight(what, p.m, p.n, p.k, w.n(), w.k());
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) return int8_empty_sum(p, w.scales().data(), bias, c);
  const int threads = prepare_threads();
  Entry entry;
  std::shared_ptr<const PackedInt8Weights::State::Layout> layout;
  translate_errors(what, fmt::format("({} x {}) u8 @ ({} x {})^T s8", p.m, p.k, p.n, p.k), [&] {
    entry = int8_entry(p, w.state_->scales, w.state_->hash, bias != nullptr, w.state_->blocked,
                       threads);
    layout = w.state_->blocked ? w.state_->in_layout(entry.weights) : w.state_->current();
  });
  run_int8(what, p, entry.prim, layout->data, w.scales().data(), bias, c, x);
}

}  // namespace nabla::onednn

#endif
