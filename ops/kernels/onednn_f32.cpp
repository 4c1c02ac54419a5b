// The float32 product of the oneDNN backend (ops/kernels/onednn.h) for inference: oneDNN 2.6's
// matmul (https://oneapi-src.github.io/oneDNN/v2.6/dev_guide_matmul.html) on a weight reordered
// once into the layout its brgemm kernel reads (format `any`), with the bias and the activation
// as part of the kernel (dev_guide_attributes_post_ops.html). OpenBLAS's sgemm copies B into its
// own panels on every call (`sgemm_oncopy`, ~8% of encoder_infer); here that copy is made once.
// One primitive per (rows, columns, depth, strides, bias, activation, threads), from the shared
// cache.
#if NABLA_WITH_ONEDNN
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <unordered_map>

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

memory reorder_to(const memory& from, const memory::desc& md) {
  memory to(md, engine());
  dnnl::reorder(from, to).execute(stream(), const_cast<memory&>(from), to);
  stream().wait();
  return to;
}

// The layout is asked of a primitive for this many rows; a call that wants another repacks.
constexpr int64_t kPackRows = 512;

}  // namespace

// As PackedInt8Weights::State: the layout is replaced, never changed in place.
struct PackedF32Weights::State {
  struct Layout {
    memory::desc md;
    memory data;
  };
  int64_t n = 0, k = 0;
  std::mutex mutex;
  std::shared_ptr<const Layout> layout;  // null when n or k is 0
  int64_t repacks = 0;

  std::shared_ptr<const Layout> in_layout(const memory::desc& md) {
    std::lock_guard<std::mutex> lock(mutex);
    if (layout->md == md) return layout;
    layout = std::make_shared<const Layout>(Layout{md, reorder_to(layout->data, md)});
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
    const memory plain(linear_weights_md(n, k, dt::f32, false), engine(), const_cast<float*>(w));
    F32Linear p;
    p.m = kPackRows, p.n = n, p.k = k, p.ldx = k, p.ldc = n;
    const memory::desc md = f32_primitive_desc(p, false).weights_desc();
    state_->layout =
        std::make_shared<const State::Layout>(State::Layout{md, reorder_to(plain, md)});
  });
}

int64_t PackedF32Weights::n() const { return state_ ? state_->n : 0; }
int64_t PackedF32Weights::k() const { return state_ ? state_->k : 0; }
int64_t PackedF32Weights::packed_bytes() const {
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->layout ? static_cast<int64_t>(state_->layout->md.get_size()) : 0;
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
        {DNNL_ARG_WEIGHTS, layout->data},
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
