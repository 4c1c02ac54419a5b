// Scaled dot-product attention (Vaswani et al., 2017, sec. 3.2.1; d2l.ai sec. 11.3). Per head n
// (one slice of the leading dims):
//   Q (L, E), K (S, E), V (S, Ev);  s = scale Q K^T + mask (hidden keys, causal ones too: -inf)
//   P = softmax(s) by rows;  Z = dropout multipliers (keep / (1 - p), or 0);  O = (P * Z) V
//   lse = log(sum(exp(s))) per row
// Backward, with W = P * Z the weights that multiplied V:
//   dV = W^T dO,  dP = (dO V^T) * Z,  dS = P * (dP - rowsum(P * dP)),  dQ = scale dS K,
//   dK = scale dS^T Q.  rowsum(P * dP) = rowsum(dO * O), which the tuned kernel uses.
// Saved: q, k, v, the mask, O and lse (P is recomputed from s and lse, and Z from the Philox
// counters dropout() would use, so nothing of size L x S is kept).
// The reference kernels below walk one query row at a time; the tuned, tiled (flash-style)
// kernels are in ops/kernels/attention.*. Every operand, inputs and results alike, is read or
// written in place through its strides: the output and dq, dk, dv are laid out in memory like
// q, q, k, v. For heads split off a projection, (B, H, L, d) views of (B, L, H, d) memory, the
// output then merges back into (B, L, E) as a free view, and the gradients reach the projection
// without a copy.
#include "nabla/ops/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/attention_fused.h"
#include "nabla/ops/autocast.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/dropout.h"
#include "nabla/ops/gemm.h"
#include "nabla/ops/kernels/attention.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce.h"
#include "nabla/ops/softmax.h"

namespace nabla {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
using Problem = kernels::SdpaProblem;

// ----------------------------------------------------------------------------
// Reference kernels: one query row at a time, in double, as the banner writes the math.

// Element (n, i, c) of the N (rows x cols) slices of an operand, read through its strides.
template <class P>
struct HeadView {
  P base;
  std::vector<int64_t> offsets;
  int64_t row_stride, col_stride;
  HeadView(P data, const Tensor& t, int64_t N)
      : base(data),
        offsets(kernels::slice_offsets(t, N)),
        row_stride(t.stride(-2)),
        col_stride(t.stride(-1)) {}
  auto& operator()(int64_t n, int64_t i, int64_t c) const {
    return base[offsets[n] + i * row_stride + c * col_stride];
  }
};

template <class T>
struct ReferenceInputs {
  HeadView<const T*> q, k, v;
  Tensor mask;  // broadcast to (..., L, S), or undefined
  const Problem& pr;
  Generator gen;  // the dropout words
  ReferenceInputs(const Tensor& qt, const Tensor& kt, const Tensor& vt, const Tensor& m,
                  const Problem& p)
      : q(qt.data_ptr<T>(), qt, p.N),
        k(kt.data_ptr<T>(), kt, p.N),
        v(vt.data_ptr<T>(), vt, p.N),
        pr(p),
        gen(p.seed) {
    if (!m.defined()) return;
    Shape full(qt.shape().begin(), qt.shape().end() - 2);
    full.push_back(p.L);
    full.push_back(p.S);
    mask = m.detach();
    while (mask.dim() < static_cast<int64_t>(full.size())) mask = mask.unsqueeze(0);
    mask = mask.expand(full);
  }

  // Row i of head n's scores: s_j = scale q_i . k_j + mask_ij, or -inf for a hidden key.
  void scores(int64_t n, int64_t i, std::vector<double>& s) const {
    for (int64_t j = 0; j < pr.S; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < pr.E; ++e) dot += double(q(n, i, e)) * k(n, j, e);
      s[j] = pr.causal && j > i ? kNegInf<double> : pr.scale * dot;
    }
    if (!mask.defined()) return;
    if (mask.dtype() == kBool) {
      HeadView<const bool*> keep(mask.data_ptr<bool>(), mask, pr.N);
      for (int64_t j = 0; j < pr.S; ++j)
        if (!keep(n, i, j)) s[j] = kNegInf<double>;
    } else {
      HeadView<const T*> add(mask.data_ptr<T>(), mask, pr.N);
      for (int64_t j = 0; j < pr.S; ++j) s[j] += add(n, i, j);
    }
  }

  // Z_ij: element e = (n L + i) S + j of the (N, L, S) weights uses word e % 4 of Philox block
  // first + e / 4, the counters dropout() would use for those weights.
  double dropout_multiplier(int64_t n, int64_t i, int64_t j) const {
    if (pr.p == 0) return 1;
    const auto e = static_cast<uint64_t>((n * pr.L + i) * pr.S + j);
    const uint32_t word = gen.block(pr.first + e / 4)[e % 4];
    const auto threshold = static_cast<uint64_t>(std::ceil(pr.p * 0x1.0p32));
    return word >= threshold ? 1 / (1 - pr.p) : 0;
  }
};

// O_i = sum_j P_ij Z_ij V_j with P_i = softmax(s_i), and lse_i = log sum_j exp(s_ij).
template <class T>
void attention_forward_reference(const ReferenceInputs<T>& in, const Tensor& out_t,
                                 const Tensor& lse_t) {
  const Problem& pr = in.pr;
  HeadView<T*> out(out_t.data_ptr<T>(), out_t, pr.N);
  std::vector<double> s(pr.S), o(pr.Ev);
  for (int64_t n = 0; n < pr.N; ++n) {
    for (int64_t i = 0; i < pr.L; ++i) {
      in.scores(n, i, s);
      const double m = std::accumulate(s.begin(), s.end(), kNegInf<double>,
                                       [](double a, double b) { return std::max(a, b); });
      double sum = 0;  // stays 0 when every key is hidden: a zero row, lse = -inf
      std::fill(o.begin(), o.end(), 0.0);
      if (m != kNegInf<double>) {
        for (double sj : s) sum += std::exp(sj - m);
        for (int64_t j = 0; j < pr.S; ++j) {
          const double w = std::exp(s[j] - m) / sum * in.dropout_multiplier(n, i, j);
          for (int64_t c = 0; c < pr.Ev; ++c) o[c] += w * in.v(n, j, c);
        }
      }
      for (int64_t c = 0; c < pr.Ev; ++c) out(n, i, c) = static_cast<T>(o[c]);
      lse_t.data_ptr<T>()[n * pr.L + i] = static_cast<T>(m + std::log(sum));
    }
  }
}

// dq, dk, dv by the banner's formulas, P_i recomputed as exp(s_i - lse_i).
template <class T>
void attention_backward_reference(const ReferenceInputs<T>& in, const Tensor& lse_t,
                                  const Tensor& grad_t, const Tensor& dq_t, const Tensor& dk_t,
                                  const Tensor& dv_t) {
  const Problem& pr = in.pr;
  HeadView<const T*> grad(grad_t.data_ptr<T>(), grad_t, pr.N);
  HeadView<T*> dq(dq_t.data_ptr<T>(), dq_t, pr.N), dk(dk_t.data_ptr<T>(), dk_t, pr.N);
  HeadView<T*> dv(dv_t.data_ptr<T>(), dv_t, pr.N);
  std::vector<double> s(pr.S), p(pr.S), z(pr.S), dp(pr.S), ds(pr.S);
  for (int64_t n = 0; n < pr.N; ++n) {
    // dK and dV sum over every query row: accumulated per head, in double.
    std::vector<double> dk_n(pr.S * pr.E, 0.0), dv_n(pr.S * pr.Ev, 0.0);
    for (int64_t i = 0; i < pr.L; ++i) {
      in.scores(n, i, s);
      const double lse = lse_t.data_ptr<T>()[n * pr.L + i];
      double rowsum = 0;  // rowsum(P * dP)
      for (int64_t j = 0; j < pr.S; ++j) {
        p[j] = lse == kNegInf<double> ? 0 : std::exp(s[j] - lse);
        z[j] = in.dropout_multiplier(n, i, j);
        double dw = 0;  // (dO V^T)_ij, the gradient of the weight P_ij Z_ij
        for (int64_t c = 0; c < pr.Ev; ++c) dw += double(grad(n, i, c)) * in.v(n, j, c);
        dp[j] = dw * z[j];
        rowsum += p[j] * dp[j];
      }
      for (int64_t j = 0; j < pr.S; ++j) ds[j] = p[j] * (dp[j] - rowsum);
      for (int64_t e = 0; e < pr.E; ++e) {
        double dq_ie = 0;
        for (int64_t j = 0; j < pr.S; ++j) dq_ie += ds[j] * in.k(n, j, e);
        dq(n, i, e) = static_cast<T>(pr.scale * dq_ie);
      }
      for (int64_t j = 0; j < pr.S; ++j) {
        for (int64_t e = 0; e < pr.E; ++e) dk_n[j * pr.E + e] += pr.scale * ds[j] * in.q(n, i, e);
        for (int64_t c = 0; c < pr.Ev; ++c) dv_n[j * pr.Ev + c] += p[j] * z[j] * grad(n, i, c);
      }
    }
    for (int64_t j = 0; j < pr.S; ++j) {
      for (int64_t e = 0; e < pr.E; ++e) dk(n, j, e) = static_cast<T>(dk_n[j * pr.E + e]);
      for (int64_t c = 0; c < pr.Ev; ++c) dv(n, j, c) = static_cast<T>(dv_n[j * pr.Ev + c]);
    }
  }
}

void forward_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       const Problem& pr, const Tensor& out, const Tensor& lse) {
  dispatch_float(q.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    attention_forward_reference<T>(ReferenceInputs<T>(q, k, v, mask, pr), out, lse);
  });
}

void backward_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        const Problem& pr, const Tensor& lse, const Tensor& grad, const Tensor& dq,
                        const Tensor& dk, const Tensor& dv) {
  dispatch_float(q.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    attention_backward_reference<T>(ReferenceInputs<T>(q, k, v, mask, pr), lse, grad, dq, dk, dv);
  });
}

// ----------------------------------------------------------------------------
// The backward node and the forward.

// A new tensor of `shape` whose dims lie in memory in the order of t's strides, the last dim
// innermost (ties keep the dim order): a result "like" t, as PyTorch's preserve_format gives.
Tensor empty_in_layout_of(const Tensor& t, const Shape& shape) {
  const int64_t nd = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(nd - 1));
  for (int64_t d = 0; d < nd - 1; ++d) order[static_cast<size_t>(d)] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  order.push_back(nd - 1);
  Shape physical, inverse(static_cast<size_t>(nd));
  for (size_t i = 0; i < order.size(); ++i) {
    physical.push_back(shape[static_cast<size_t>(order[i])]);
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  }
  return empty(physical, t.dtype()).permute(inverse);
}

// The weights softmax(scale q k^T + mask) with the causal limit, materialised (..., L, S).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, bool causal,
                         double scale) {
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(mul(q, scale), k.mT());
  Tensor m = mask;
  if (causal) {
    Tensor keep = le(arange(S).view({1, S}), arange(L).view({L, 1}));  // key s <= query l
    if (!m.defined()) {
      m = keep;
    } else if (m.dtype() == kBool) {
      m = logical_and(m, keep);
    } else {
      m = add(m, masked_fill(zeros({L, S}, m.dtype()), logical_not(keep), kNegInf<double>));
    }
  }
  if (!m.defined()) return softmax(scores, -1);
  return masked_softmax(scores, m, m.dtype() == kBool ? MaskKind::Bool : MaskKind::Additive);
}

// The dropout multipliers Z (keep / (1 - p), or 0) of the (..., L, S) weights for counters from
// `first`, as a constant tensor.
Tensor dropout_multipliers(const Shape& shape, DType dt, const Problem& pr) {
  Generator gen(pr.seed);
  gen.set_state(pr.seed, pr.first);
  return dropout(ones(shape, dt), pr.p, true, gen);
}

// FLOPs of the two products per head, Q K^T and W V (as torch.utils.flop_counter counts SDPA).
int64_t forward_flops(const Problem& pr) { return 2 * pr.N * pr.L * pr.S * (pr.E + pr.Ev); }

// SdpaBackward: the tuned or the reference backward kernel; under create_graph, the same formulas
// written with ops (differentiable, but O(L * S) memory).
struct SdpaBackward final : Node {
  SavedTensor q{this, "q"}, k{this, "k"}, v{this, "v"}, out{this, "out"}, lse{this, "lse"},
      mask{this, "mask"};
  Problem pr;
  explicit SdpaBackward(const Problem& p) : pr(p) {}

  std::vector<Tensor> backward(const Tensor& grad) override {
    Tensor qt = q.get(), kt = k.get(), vt = v.get(), m = mask.defined() ? mask.get() : Tensor();
    if (GradMode::enabled()) return composite_backward(qt, kt, vt, m, grad);
    const auto [dq, dk, dv] =
        detail::sdpa_fused_backward(qt, kt, vt, m, pr, out.get(), lse.get(), grad);
    return {dq, dk, dv};
  }

  std::vector<Tensor> composite_backward(const Tensor& qt, const Tensor& kt, const Tensor& vt,
                                         const Tensor& m, const Tensor& grad) const {
    Tensor p = attention_weights(qt, kt, m, pr.causal, pr.scale);
    Tensor z = pr.p > 0 ? dropout_multipliers(p.shape(), p.dtype(), pr) : Tensor();
    Tensor dv = matmul((z.defined() ? mul(p, z) : p).mT(), grad);
    Tensor dp = matmul(grad, vt.mT());
    if (z.defined()) dp = mul(dp, z);
    Tensor ds = mul(p, sub(dp, sum(mul(dp, p), {-1}, true)));
    return {mul(matmul(ds, kt), pr.scale), mul(matmul(ds.mT(), qt), pr.scale), dv};
  }
  const char* name() const override { return "ScaledDotProductAttentionBackward"; }
  // The kernel's five products per head: Q K^T again, dO V^T, W^T dO, dS K, dS^T Q. Under
  // create_graph the composite formula's ops count their own.
  int64_t backward_flops() const override {
    return GradMode::enabled() ? 0 : 2 * pr.N * pr.L * pr.S * (3 * pr.E + 2 * pr.Ev);
  }
};

// Validates the call and fills everything but the dropout counters.
Problem check_problem(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    throw DTypeError(
        fmt::format("{}: q, k and v must share one floating dtype, got {} {}, {} {}, {} {}", kOp,
                    dtype_name(q.dtype()), shape_str(q.shape()), dtype_name(k.dtype()),
                    shape_str(k.shape()), dtype_name(v.dtype()), shape_str(v.shape())));
  const int64_t nd = q.dim();
  bool ok = nd >= 2 && k.dim() == nd && v.dim() == nd && q.size(-1) == k.size(-1) &&
            k.size(-2) == v.size(-2);
  for (int64_t d = 0; ok && d < nd - 2; ++d) ok = k.size(d) == q.size(d) && v.size(d) == q.size(d);
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: expected q (..., L, E), k (..., S, E), v (..., S, Ev) with the same leading dims, "
        "got {}, {}, {}",
        kOp, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape())));
  if (!(o.dropout_p >= 0 && o.dropout_p <= 1))
    throw ValueError(fmt::format("{}: dropout_p must be in [0, 1], got {}", kOp, o.dropout_p));
  Problem pr;
  for (int64_t d = 0; d < nd - 2; ++d) pr.N *= q.size(d);
  pr.L = q.size(-2), pr.S = k.size(-2), pr.E = q.size(-1), pr.Ev = v.size(-1);
  pr.scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(pr.E, 1)));
  pr.p = o.dropout_p;
  pr.causal = o.is_causal;
  const Tensor& m = o.attn_mask;
  if (m.defined()) {
    if (m.dtype() != kBool && m.dtype() != q.dtype())
      throw DTypeError(fmt::format("{}: attn_mask must be bool or {} like q, got {} {}", kOp,
                                   dtype_name(q.dtype()), dtype_name(m.dtype()),
                                   shape_str(m.shape())));
    bool broadcasts = m.dim() <= nd;
    for (int64_t i = 1; broadcasts && i <= m.dim(); ++i) {
      const int64_t want = i == 1 ? pr.S : (i == 2 ? pr.L : q.size(-i));
      broadcasts = m.size(-i) == 1 || m.size(-i) == want;
    }
    if (!broadcasts)
      throw ShapeError(fmt::format("{}: attn_mask {} does not broadcast to the weights {}", kOp,
                                   shape_str(m.shape()), shape_str([&] {
                                     Shape s(q.shape().begin(), q.shape().end() - 2);
                                     s.push_back(pr.L);
                                     s.push_back(pr.S);
                                     return s;
                                   }())));
  }
  return pr;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const SdpaOptions& o) {
  if (autocast::applies({&q_in, &k_in, &v_in}))  // Q K^T and P V on bf16 values
    return autocast::scaled_dot_product_attention(q_in, k_in, v_in, o);
  inspect::OpScope op_scope("scaled_dot_product_attention", {&q_in, &k_in, &v_in});
  Problem pr = check_problem(q_in, k_in, v_in, o);
  op_scope.count_flops([&] { return forward_flops(pr); });
  const Tensor& mask = o.attn_mask;
  if (mask.defined() && mask.requires_grad() && GradMode::enabled())
    return scaled_dot_product_attention_composite(q_in, k_in, v_in, o);
  auto [out, lse] = detail::sdpa_fused_forward(q_in, k_in, v_in, o, pr);
  if (auto node = make_node<SdpaBackward>({&q_in, &k_in, &v_in}, pr)) {
    // The inputs are saved as given (not the detached copies) so that create_graph reaches them.
    node->q.save(q_in);
    node->k.save(k_in);
    node->v.save(v_in);
    node->out.save(out, /*is_output=*/true);
    node->lse.save(lse);
    if (mask.defined()) node->mask.save(mask);
    set_history(out, node);
  }
  return out;
}

namespace detail {

kernels::SdpaProblem sdpa_problem(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const SdpaOptions& options) {
  return check_problem(q, k, v, options);
}

void sdpa_reserve_dropout(const SdpaOptions& o, kernels::SdpaProblem& pr) {
  Generator& gen = o.generator ? *o.generator : default_generator();
  if (pr.p > 0) {
    pr.seed = gen.seed();
    pr.first = gen.advance(static_cast<uint64_t>((pr.N * pr.L * pr.S + 3) / 4));
  }
}

SdpaForward sdpa_fused_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                               const SdpaOptions& o, kernels::SdpaProblem& pr) {
  sdpa_reserve_dropout(o, pr);
  // The tuned kernel hands q, k, v to BLAS tile by tile: an operand BLAS cannot read is copied.
  Tensor q = blas::as_readable(q_in, false), k = blas::as_readable(k_in, false);
  Tensor v = blas::as_readable(v_in, false);
  Shape out_shape(q.shape().begin(), q.shape().end() - 1);
  out_shape.push_back(pr.Ev);
  Tensor out = empty_in_layout_of(q, out_shape), lse = empty({pr.N, pr.L}, q.dtype());
  if (kernels::tuned_enabled()) {
    kernels::sdpa_forward(q, k, v, o.attn_mask, pr, out, lse);
  } else {
    forward_reference(q, k, v, o.attn_mask, pr, out, lse);
  }
  return {out, lse};
}

std::array<Tensor, 3> sdpa_fused_backward(const Tensor& qt, const Tensor& kt, const Tensor& vt,
                                          const Tensor& m, const kernels::SdpaProblem& pr,
                                          const Tensor& out, const Tensor& lse,
                                          const Tensor& grad) {
  // The tuned kernel hands every operand to BLAS tile by tile: one BLAS cannot read is copied.
  Tensor g = blas::as_readable(grad, false);
  Tensor qr = blas::as_readable(qt, false), kr = blas::as_readable(kt, false);
  Tensor vr = blas::as_readable(vt, false);
  Tensor dq = empty_in_layout_of(qr, qr.shape()), dk = empty_in_layout_of(kr, kr.shape());
  Tensor dv = empty_in_layout_of(vr, vr.shape());
  if (kernels::tuned_enabled()) {
    kernels::sdpa_backward(qr, kr, vr, m, pr, out, lse, g, dq, dk, dv);
  } else {
    backward_reference(qr, kr, vr, m, pr, lse, g, dq, dk, dv);
  }
  return {dq, dk, dv};
}

}  // namespace detail

Tensor scaled_dot_product_attention_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const SdpaOptions& o) {
  inspect::OpScope op_scope("scaled_dot_product_attention_composite", {&q, &k, &v});
  const Problem pr = check_problem(q, k, v, o);
  op_scope.count_flops([&] { return forward_flops(pr); });
  Tensor weights = attention_weights(q, k, o.attn_mask, pr.causal, pr.scale);
  Generator& gen = o.generator ? *o.generator : default_generator();
  return matmul(pr.p > 0 ? dropout(weights, pr.p, true, gen) : weights, v);
}

}  // namespace nabla
