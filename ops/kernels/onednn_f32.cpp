// The float32 product of the oneDNN backend (ops/kernels/onednn.h) for inference: oneDNN 2.6's
// matmul (https://oneapi-src.github.io/oneDNN/v2.6/dev_guide_matmul.html) on a weight packed
// once into the layout its brgemm kernel reads (format `any`), with the bias and the activation
// as part of the kernel (dev_guide_attributes_post_ops.html; PrepackedLinear runs its activation
// itself). OpenBLAS's sgemm copies B into its
// own panels on every call (`sgemm_oncopy`, ~8% of encoder_infer); here that copy is made once.
// One primitive per (rows, columns, depth, strides, bias, activation, threads), from the shared
// cache.
//
// The weight is packed here, not by a oneDNN reorder primitive: creating and running a reorder
// touches ~0.7 MB of libdnnl's code that then stays resident (peak RSS, docs/perf.md), for a
// copy that is a loop over the layout's blocking descriptor. The packed copy lives in nabla's
// allocator, so the memory ledger counts it.
#if NABLA_WITH_ONEDNN
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "nabla/core/allocator.h"
#include "nabla/core/error.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/kernels/onednn_backend.h"

namespace nabla::onednn {

using namespace backend;

namespace {

dnnl::matmul::primitive_desc f32_primitive_desc(const F32Linear& p, bool has_bias) {
  dnnl::primitive_attr attr;
  if (p.activation != Activation::None) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, eltwise_of(p.activation), 0, 0);
    attr.set_post_ops(ops);
  }
  const memory::desc x_md(dims({p.m, p.k}), dt::f32, dims({p.ldx, 1}));
  const memory::desc c_md(dims({p.m, p.n}), dt::f32, dims({p.ldc, 1}));
  const memory::desc b_md(dims({1, p.n}), dt::f32, dims({p.n, 1}));
  const memory::desc w_md = linear_weights_md(p.n, p.k, dt::f32, true);
  const auto desc =
      has_bias ? dnnl::matmul::desc(x_md, w_md, b_md, c_md) : dnnl::matmul::desc(x_md, w_md, c_md);
  return dnnl::matmul::primitive_desc(desc, attr, engine());
}

std::string shapes_of(const F32Linear& p) {
  return fmt::format("({} x {}) f32 @ ({} x {})^T f32 (packed)", p.m, p.k, p.n, p.k);
}

// The element offset of W^T[kk][nn] in a blocked 2-D (k x n) layout, as oneDNN computes it
// (memory_desc_wrapper::off_v): the inner blocks innermost, last block first, then the outer
// strides over the block indices.
int64_t blocked_offset(const dnnl_memory_desc_t& md, int64_t kk, int64_t nn) {
  const dnnl_blocking_desc_t& blk = md.format_desc.blocking;
  int64_t pos[2] = {kk + md.padded_offsets[0], nn + md.padded_offsets[1]};
  int64_t offset = md.offset0, block_stride = 1;
  for (int i = blk.inner_nblks - 1; i >= 0; --i) {
    const int64_t d = blk.inner_idxs[i];
    offset += (pos[d] % blk.inner_blks[i]) * block_stride;
    pos[d] /= blk.inner_blks[i];
    block_stride *= blk.inner_blks[i];
  }
  return offset + pos[0] * blk.strides[0] + pos[1] * blk.strides[1];
}

// A packed weight's bytes from nabla's allocator, zeroed (the layout's padding must read 0).
std::shared_ptr<float> packed_buffer(size_t bytes) {
  auto* p = static_cast<float*>(allocator::allocate(bytes));
  std::fill_n(p, bytes / sizeof(float), 0.0f);
  return {p, [bytes](float* q) { allocator::deallocate(q, bytes); }};
}

// The layout is asked of a primitive for this many rows; a call that wants another repacks.
constexpr int64_t kPackRows = 512;

bool is_blocked_2d(const memory::desc& md) {
  return md.data.ndims == 2 && md.data.format_kind == dnnl_blocked;
}

}  // namespace

// As PackedInt8Weights::State: the layout is replaced, never changed in place.
struct PackedF32Weights::State {
  struct Layout {
    memory::desc md;
    std::shared_ptr<float> data;                // md.get_size() bytes
    float at(int64_t row, int64_t col) const {  // W[row][col] = W^T[col][row]
      return data.get()[blocked_offset(md.data, col, row)];
    }
  };
  int64_t n = 0, k = 0;
  std::mutex mutex;
  std::shared_ptr<const Layout> layout;  // null when n or k is 0
  int64_t repacks = 0;

  // The n x k weight w(row, col) written into layout md.
  template <class Read>
  static std::shared_ptr<const Layout> pack(const memory::desc& md, int64_t n, int64_t k,
                                            Read&& w) {
    if (!is_blocked_2d(md))
      throw Error(
          fmt::format("onednn::PackedF32Weights: the kernel wants a layout that is not "
                      "blocked (format kind {})",
                      static_cast<int>(md.data.format_kind)));
    auto layout = std::make_shared<Layout>(Layout{md, packed_buffer(md.get_size())});
    float* out = layout->data.get();
    for (int64_t row = 0; row < n; ++row)
      for (int64_t col = 0; col < k; ++col) out[blocked_offset(md.data, col, row)] = w(row, col);
    return layout;
  }

  std::shared_ptr<const Layout> in_layout(const memory::desc& md) {
    std::lock_guard<std::mutex> lock(mutex);
    if (layout->md == md) return layout;
    const std::shared_ptr<const Layout> from = layout;
    layout = pack(md, n, k, [&](int64_t row, int64_t col) { return from->at(row, col); });
    ++repacks;
    return layout;
  }
};

PackedF32Weights::PackedF32Weights(int64_t n, int64_t k, const float* w) {
  constexpr const char* what = "onednn::PackedF32Weights";
  check_sizes(what, {n, k});
  state_ = std::make_shared<State>();
  state_->n = n, state_->k = k;
  if (n == 0 || k == 0) return;
  prepare_threads();
  translate_errors(what, fmt::format("weight ({} x {}) f32", n, k), [&] {
    F32Linear p;
    p.m = kPackRows, p.n = n, p.k = k, p.ldx = k, p.ldc = n;
    const memory::desc md = f32_primitive_desc(p, false).weights_desc();
    state_->layout =
        State::pack(md, n, k, [&](int64_t row, int64_t col) { return w[row * k + col]; });
  });
}

int64_t PackedF32Weights::n() const { return state_ ? state_->n : 0; }
int64_t PackedF32Weights::k() const { return state_ ? state_->k : 0; }
int64_t PackedF32Weights::packed_bytes() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->layout ? static_cast<int64_t>(state_->layout->md.get_size()) : 0;
}
std::vector<float> PackedF32Weights::unpack() const {
  if (!state_) return {};
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<float> w(static_cast<size_t>(state_->n * state_->k));
  if (!state_->layout) return w;
  for (int64_t row = 0; row < state_->n; ++row)
    for (int64_t col = 0; col < state_->k; ++col)
      w[static_cast<size_t>(row * state_->k + col)] = state_->layout->at(row, col);
  return w;
}
int64_t PackedF32Weights::repacks() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->repacks;
}

void linear_f32(const F32Linear& p, const float* x, const PackedF32Weights& w, const float* bias,
                float* c) {
  constexpr const char* what = "onednn::linear_f32";
  check_sizes(what, {p.m, p.n, p.k, p.ldx, p.ldc});
  check_packed_weight(what, p.m, p.n, p.k, w.n(), w.k());
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0)
    throw ValueError(fmt::format("{}: k = 0 (an empty sum) is not supported; use linear", what));
  const int threads = prepare_threads();
  const bool has_bias = bias != nullptr;
  const Key key{3,       p.m, p.n, p.k, p.ldx, p.ldc, has_bias, static_cast<int64_t>(p.activation),
                threads, 0,   0,   0,   0,     0,     0,        0};
  translate_errors(what, shapes_of(p), [&] {
    const Entry entry = cache().get(key, [&] {
      const auto pd = f32_primitive_desc(p, has_bias);
      return Entry{dnnl::matmul(pd), pd.weights_desc(), {}};
    });
    const auto layout = w.state_->in_layout(entry.weights);
    const memory::desc x_md(dims({p.m, p.k}), dt::f32, dims({p.ldx, 1}));
    const memory::desc c_md(dims({p.m, p.n}), dt::f32, dims({p.ldc, 1}));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(x_md, engine(), const_cast<float*>(x))},
        {DNNL_ARG_WEIGHTS, memory(layout->md, engine(), layout->data.get())},
        {DNNL_ARG_DST, memory(c_md, engine(), c)}};
    if (has_bias)
      args.emplace(DNNL_ARG_BIAS, memory(memory::desc(dims({1, p.n}), dt::f32, dims({p.n, 1})),
                                         engine(), const_cast<float*>(bias)));
    entry.prim.execute(stream(), args);
    stream().wait();
  });
}

}  // namespace nabla::onednn

#endif
