// The autocast products (ops/autocast.h): one recorded op, bf16_product, under matmul, linear and
// linear_activation.
//   forward:   C = op(A) op(B) in float32 from A16 = bf16(A), B16 = bf16(B)
//   backward:  G16 = bf16(grad);  dop(A) = G16 op(B16)^T,  dop(B) = op(A16)^T G16  (float32
//              accumulation), each turned back to the stored layout of A or B and to its dtype;
//              saves B16 if A needs grad, A16 if B needs grad
#include "nabla/ops/autocast.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/machine.h"
#include "nabla/ops/activation.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/attention_fused.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/unary.h"

namespace nabla::autocast {
namespace {

std::atomic<int> forced_path{-1};                 // -1: detected
std::atomic<int64_t> attention_runs[2] = {0, 0};  // per AttentionKernel
std::atomic<int64_t> notice_count{0};
std::once_flag notice_once;

Path detected_path() {
  static const Path p =
      onednn::available() && cpu_has_native_bf16() ? Path::OneDnn : Path::Widening;
  return p;
}

// A detached, contiguous bfloat16 copy of t (t itself when it already is one).
Tensor to_bf16(const Tensor& t) { return t.detach().to(kBFloat16).contiguous(); }

// The rows x cols matrix dims of an operand's op(): (r, c) or (c, r).
struct OpDims {
  int64_t rows, cols;
};
OpDims op_dims(const Tensor& t, bool trans) {
  return trans ? OpDims{t.size(-1), t.size(-2)} : OpDims{t.size(-2), t.size(-1)};
}

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// t's matrices, one per entry of `batch` (which t's batch dims broadcast to): the element stride
// between consecutive ones, 0 when t has one matrix. A batch that broadcasts otherwise is copied.
int64_t batch_stride(Tensor& t, const Shape& batch) {
  const int64_t per = t.size(-2) * t.size(-1);
  const Shape own = batch_of(t);
  if (shape_numel(own) == 1) return 0;
  Shape padded(batch.size() - own.size(), 1);
  padded.insert(padded.end(), own.begin(), own.end());
  if (padded == batch) return per;
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  t = t.expand(full).contiguous();
  return per;
}

// op(a16) op(b16) (bfloat16, contiguous) -> float32 (batch..., M, N). No autograd.
Tensor product_kernel(Tensor a16, bool ta, Tensor b16, bool tb) {
  const auto [M, K] = op_dims(a16, ta);
  const int64_t N = op_dims(b16, tb).cols;
  const Shape batch = broadcast_shapes("matmul", batch_of(a16), batch_of(b16));
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  const int64_t nbatch = shape_numel(batch);
  if (K == 0 || M == 0 || N == 0 || nbatch == 0) return zeros(out_shape, kFloat32);
  if (path() == Path::Widening) {
    // float32 GEMMs of the exact widened values; autocast off so matmul does not come back here.
    Scope off(false);
    NoGradGuard no_grad;
    Tensor a = a16.to(kFloat32), b = b16.to(kFloat32);
    return nabla::matmul(ta ? a.mT() : a, tb ? b.mT() : b);
  }
  onednn::Bf16Matmul p;
  p.batch = nbatch;
  p.m = M;
  p.n = N;
  p.k = K;
  p.trans_a = ta;
  p.trans_b = tb;
  p.batch_stride_a = batch_stride(a16, batch);
  p.batch_stride_b = batch_stride(b16, batch);
  p.lda = a16.size(-1);
  p.ldb = b16.size(-1);
  p.ldc = N;
  p.batch_stride_c = M * N;
  Tensor c = empty(out_shape, kFloat32);
  onednn::matmul_bf16(p, reinterpret_cast<const uint16_t*>(a16.data_ptr<bfloat16>()),
                      reinterpret_cast<const uint16_t*>(b16.data_ptr<bfloat16>()),
                      c.data_ptr<float>());
  return c;
}

struct AutocastMatmulBackward final : Node {
  SavedTensor a16{this, "a"}, b16{this, "b"};
  bool ta, tb;
  AutocastMatmulBackward(bool trans_a, bool trans_b) : ta(trans_a), tb(trans_b) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    if (GradMode::enabled())
      throw AutogradError(
          "autocast matmul: create_graph (a gradient of a gradient) is not supported through "
          "an autocast product; run that part outside autocast::Scope");
    const Tensor g = to_bf16(grad);
    Tensor grad_a, grad_b;
    // op(A) = G op(B)^T; stored A = op(A) or its transpose (op(B) G^T).
    if (needs_input_grad(0))
      grad_a =
          ta ? product_kernel(b16.get(), tb, g, true) : product_kernel(g, false, b16.get(), !tb);
    // op(B) = op(A)^T G; stored B = op(B) or its transpose (G^T op(A)).
    if (needs_input_grad(1))
      grad_b =
          tb ? product_kernel(g, true, a16.get(), ta) : product_kernel(a16.get(), !ta, g, false);
    if (grad_a.defined() && input_dtypes[0] != kFloat32) grad_a = grad_a.to(input_dtypes[0]);
    if (grad_b.defined() && input_dtypes[1] != kFloat32) grad_b = grad_b.to(input_dtypes[1]);
    return {grad_a, grad_b};
  }
  const char* name() const override { return "AutocastMatmulBackward"; }
};

// The activation after an autocast linear, saving less than relu/gelu would (their float32
// output or input): ReLU keeps a bool mask (not z <= 0: a NaN passes, as relu()), GELU its input
// rounded to bf16 (the derivative at the rounded z, within the bf16 tolerance of the autocast
// product before it).
//   backward:  grad_z = grad where mask, else 0  or  gelu'(z16) grad
struct AutocastActivationBackward final : Node {
  SavedTensor saved{this, "saved"};  // mask (ReLU) or z16 (GELU)
  LinearActivation act;
  explicit AutocastActivationBackward(LinearActivation a) : act(a) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    const Tensor s = saved.get();
    if (act == LinearActivation::ReLU) return {where(s, grad, 0.0)};
    return {gelu_backward(
        grad, s.to(kFloat32),
        act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh)};
  }
  const char* name() const override { return "AutocastActivationBackward"; }
};

Tensor activation(const Tensor& z, LinearActivation act) {
  Tensor y, keep;
  {
    NoGradGuard no_grad;
    if (act == LinearActivation::ReLU) {
      keep = logical_not(le(z, 0.0));
      y = relu(z);
    } else {
      y = gelu(z, act == LinearActivation::GELU ? GeluApproximate::None : GeluApproximate::Tanh);
    }
  }
  if (auto node = make_node<AutocastActivationBackward>({&z}, act)) {
    node->saved.save(act == LinearActivation::ReLU ? keep : to_bf16(z));
    set_history(y, node);
  }
  return y;
}

// scaled_dot_product_attention under autocast, on q, k, v rounded to bf16. Forward: on the oneDNN
// path both products run as bf16 products with float32 accumulation and the softmax in float32
// (ops/attention_bf16.cpp: the weights rounded to bf16 for P V, as PyTorch's CPU kernel does);
// on the widening path the fused float32 kernel runs on the widened values (each product of two
// bf16 values is exact in float32, the weights stay float32). The node keeps the bf16 q, k, v and
// O, half the bytes of float32 copies. Backward: the fused float32 kernel on the widened values
// (its products, Q K^T again, dO V^T, W^T dO, dS K, dS^T Q, run in float32; dO and the
// recomputed weights unrounded); D = rowsum(dO * O) reads O rounded to bf16, as FlashAttention's
// bf16 kernels do (Dao, 2023): u = 2^-8 of D's scale, within the tolerance.
struct AutocastSdpaBackward final : Node {
  SavedTensor q16{this, "q"}, k16{this, "k"}, v16{this, "v"}, out16{this, "out"}, lse{this, "lse"},
      mask{this, "mask"};
  kernels::SdpaProblem pr;
  explicit AutocastSdpaBackward(const kernels::SdpaProblem& p) : pr(p) {}
  std::vector<Tensor> backward(const Tensor& grad) override {
    if (GradMode::enabled())
      throw AutogradError(
          "autocast scaled_dot_product_attention: create_graph (a gradient of a gradient) is not "
          "supported through autocast attention; run that part outside autocast::Scope");
    auto wide = [](const SavedTensor& t) { return t.get().to(kFloat32); };
    const Tensor m = mask.defined() ? mask.get() : Tensor();
    auto [dq, dk, dv] = detail::sdpa_fused_backward(wide(q16), wide(k16), wide(v16), m, pr,
                                                    wide(out16), lse.get(), grad.to(kFloat32));
    std::vector<Tensor> grads{dq, dk, dv};
    for (size_t i = 0; i < grads.size(); ++i)
      if (input_dtypes[i] != kFloat32) grads[i] = grads[i].to(input_dtypes[i]);
    return grads;
  }
  const char* name() const override { return "AutocastAttentionBackward"; }
  int64_t backward_flops() const override {
    return 2 * pr.N * pr.L * pr.S * (3 * pr.E + 2 * pr.Ev);
  }
};

void check_linear(const char* who, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const bool bad_bias = bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0));
  if (x.dim() == 0 || weight.dim() != 2 || x.size(-1) != weight.size(1) || bad_bias)
    throw ShapeError(fmt::format(
        "{}: expected x (..., in), weight (out, in), bias (out,); got x {}, weight {}, bias {}",
        who, shape_str(x.shape()), shape_str(weight.shape()),
        bias.defined() ? shape_str(bias.shape()) : "none"));
}

}  // namespace

Path path() {
  const int forced = forced_path.load();
  const Path p = forced >= 0 ? static_cast<Path>(forced) : detected_path();
  if (p == Path::Widening)
    std::call_once(notice_once, [] {
      std::fprintf(stderr,
                   "nabla autocast: %s; bf16 products run as float32 GEMMs of bf16 values "
                   "(memory savings only, no speed-up)\n",
                   !onednn::available()     ? "nabla was built without oneDNN"
                   : !cpu_has_native_bf16() ? "this CPU has no native bf16 (avx512_bf16, amx_bf16)"
                                            : "the widening path was chosen for a test");
      notice_count.fetch_add(1);
    });
  return p;
}

void set_path_for_testing(std::optional<Path> p) {
  forced_path.store(p ? static_cast<int>(*p) : -1);
}

int64_t notices_printed() { return notice_count.load(); }

bool applies(std::initializer_list<const Tensor*> operands) {
  if (!enabled()) return false;
  for (const Tensor* t : operands)
    if (t->defined() && t->dtype() != kFloat32 && t->dtype() != kBFloat16) return false;
  return true;
}

Tensor bf16_product_kernel(const Tensor& a16, bool ta, const Tensor& b16, bool tb) {
  return product_kernel(a16, ta, b16, tb);
}

Tensor bf16_product(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  if (a.dim() < 2 || b.dim() < 2 || op_dims(a, ta).cols != op_dims(b, tb).rows)
    throw ShapeError(fmt::format("autocast matmul: shapes {}{} and {}{} are not aligned",
                                 shape_str(a.shape()), ta ? "^T" : "", shape_str(b.shape()),
                                 tb ? "^T" : ""));
  Tensor a16 = to_bf16(a), b16 = to_bf16(b);
  Tensor y = product_kernel(a16, ta, b16, tb);
  if (auto node = make_node<AutocastMatmulBackward>({&a, &b}, ta, tb)) {
    if (node->needs_input_grad(0)) node->b16.save(b16);
    if (node->needs_input_grad(1)) node->a16.save(a16);
    set_history(y, node);
  }
  return y;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  inspect::OpScope op_scope("matmul", {&a, &b});
  nabla::detail::check_matmul_shapes(a, b);
  if (a.dim() == 1 && b.dim() == 1)
    return bf16_product(a.unsqueeze(0), false, b.unsqueeze(1), false).reshape({});
  if (a.dim() == 1) return bf16_product(a.unsqueeze(0), false, b, false).squeeze(-2);
  if (b.dim() == 1) return bf16_product(a, false, b.unsqueeze(1), false).squeeze(-1);
  return bf16_product(a, false, b, false);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  inspect::OpScope op_scope("linear", {&x, &weight, &bias});
  check_linear("linear", x, weight, bias);
  const int64_t in = weight.size(1), out = weight.size(0);
  Shape y_shape(x.shape().begin(), x.shape().end() - 1);
  y_shape.push_back(out);
  const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor y = bf16_product(x.reshape({M, in}), false, weight, true);  // (M, out), float32
  if (bias.defined()) y = add(y, bias.dtype() == kFloat32 ? bias : bias.to(kFloat32));
  return y.reshape(y_shape);
}

Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         LinearActivation act) {
  check_linear("linear_activation", x, weight, bias);
  return activation(autocast::linear(x, weight, bias), act);
}

const char* attention_kernel_name(AttentionKernel k) {
  return k == AttentionKernel::OneDnnBf16 ? "oneDNN bf16" : "fused float32";
}

AttentionKernel attention_kernel(int64_t L, int64_t S, int64_t E) {
  if (path() != Path::OneDnn) return AttentionKernel::FusedFloat32;
  // oneDNN's bf16 products cost a fixed amount per call, which small heads do not repay; for
  // them the fused float32 kernel on the widened values is faster (the profile's threshold,
  // measured with vit_small in core/machine.cpp). A forced path (tests) is taken as given.
  const bool small_head = L * S * E < machine::profile().autocast_attention_onednn_min_macs;
  return forced_path.load() < 0 && small_head ? AttentionKernel::FusedFloat32
                                              : AttentionKernel::OneDnnBf16;
}

int64_t attention_kernel_runs(AttentionKernel k) {
  return attention_runs[static_cast<int>(k)].load(std::memory_order_relaxed);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SdpaOptions& options) {
  const Tensor& mask = options.attn_mask;
  if (mask.defined() && mask.requires_grad() && GradMode::enabled()) {
    // A learned additive mask takes the composite (differentiable in the mask) on the rounded
    // values, saving what its ops save.
    auto rounded = [](const Tensor& t) { return t.to(kBFloat16).to(kFloat32); };
    Scope off(false);
    return nabla::scaled_dot_product_attention(rounded(q), rounded(k), rounded(v), options);
  }
  inspect::OpScope op_scope("scaled_dot_product_attention", {&q, &k, &v});
  if (mask.defined() && mask.dtype() != kBool && mask.dtype() != kFloat32 &&
      mask.dtype() != kBFloat16)
    throw DTypeError(fmt::format(
        "scaled_dot_product_attention: under autocast attn_mask must be bool, float32 or "
        "bfloat16, got {} {}",
        dtype_name(mask.dtype()), shape_str(mask.shape())));
  const Tensor q16 = to_bf16(q), k16 = to_bf16(k), v16 = to_bf16(v);
  SdpaOptions o = options;
  if (mask.defined() && mask.dtype() == kBFloat16) o.attn_mask = mask.detach().to(kFloat32);
  Tensor out, lse;
  kernels::SdpaProblem pr;
  {
    NoGradGuard no_grad;
    // The checks of the float32 op (shapes; the mask's own dtype was checked above): a bool
    // stand-in of the mask's shape, since the operands here are bfloat16.
    SdpaOptions shapes = o;
    if (o.attn_mask.defined()) shapes.attn_mask = zeros({}, kBool).expand(o.attn_mask.shape());
    pr = detail::sdpa_problem(q16, k16, v16, shapes);
    op_scope.count_flops([&] { return 2 * pr.N * pr.L * pr.S * (pr.E + pr.Ev); });
    const AttentionKernel kernel = attention_kernel(pr.L, pr.S, pr.E);
    attention_runs[static_cast<int>(kernel)].fetch_add(1, std::memory_order_relaxed);
    if (kernel == AttentionKernel::OneDnnBf16) {
      detail::sdpa_reserve_dropout(o, pr);
      Shape out_shape(q16.shape().begin(), q16.shape().end() - 1);
      out_shape.push_back(pr.Ev);
      out = empty(out_shape, kFloat32);
      lse = empty({pr.N, pr.L}, kFloat32);
      detail::sdpa_forward_bf16(q16, k16, v16, o.attn_mask, pr, out, lse);
    } else {  // the fused float32 kernel on the widened values: the same products, P unrounded
      detail::SdpaForward r =
          detail::sdpa_fused_forward(q16.to(kFloat32), k16.to(kFloat32), v16.to(kFloat32), o, pr);
      out = r.out;
      lse = r.lse;
    }
  }
  if (auto node = make_node<AutocastSdpaBackward>({&q, &k, &v}, pr)) {
    node->q16.save(q16);
    node->k16.save(k16);
    node->v16.save(v16);
    node->out16.save(to_bf16(out));
    node->lse.save(lse);
    if (o.attn_mask.defined()) node->mask.save(o.attn_mask.detach());
    set_history(out, node);
  }
  return out;
}

}  // namespace nabla::autocast
