// scaled_dot_product_attention's forward on bfloat16 q, k, v for autocast (ops/attention_fused.h),
// with both products on oneDNN's bf16 matmul (float32 accumulation), as PyTorch's CPU flash
// attention does for bf16 inputs (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp: Q K^T
// accumulated in float, softmax in float, the weights converted to bf16 for the product with V).
// Per chunk of heads (a score buffer of at most kChunkScores floats, so memory stays bounded
// however long the sequence):
//   S = scale (Q16 K16^T) + mask (hidden keys -inf)      one batched bf16 product
//   per row: m = max S, l = sum exp(S - m), lse = m + log l, P = exp(S - m) / l * Z
//   O = bf16(P) V16                                       one batched bf16 product
// Z are the dropout multipliers from the Philox counters dropout() would use (the fused kernel's,
// ops/kernels/attention.h). The backward is the fused float32 one on the widened operands.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/core/generator.h"
#include "nabla/core/half.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/attention_fused.h"
#include "nabla/ops/kernels/onednn.h"
#include "nabla/ops/math_constants.h"
#include "nabla/ops/vec_math.h"

namespace nabla::detail {
namespace {

constexpr int64_t kChunkScores = int64_t{1} << 20;  // 4 MB of float32 scores per chunk

const uint16_t* bits(const Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<bfloat16>());
}

// The mask broadcast to (..., L, S), read through its strides: keep flags or float32 addends.
struct MaskRows {
  Tensor m;  // expanded view
  std::vector<int64_t> offsets;
  int64_t stride_l = 0, stride_s = 0;
  bool keep = false;
  MaskRows(const Tensor& mask, const Tensor& q, const kernels::SdpaProblem& pr) {
    if (!mask.defined()) return;
    Shape full(q.shape().begin(), q.shape().end() - 2);
    full.push_back(pr.L);
    full.push_back(pr.S);
    m = mask.detach();
    if (m.dtype() != kBool && m.dtype() != kFloat32) m = m.to(kFloat32);
    while (m.dim() < static_cast<int64_t>(full.size())) m = m.unsqueeze(0);
    m = m.expand(full);
    offsets = kernels::slice_offsets(m, pr.N);
    stride_l = m.stride(-2);
    stride_s = m.stride(-1);
    keep = m.dtype() == kBool;
  }
  // Row i of head n onto the scores s (S of them).
  void apply(int64_t n, int64_t i, int64_t S, float* s) const {
    if (!m.defined()) return;
    const int64_t base = offsets[static_cast<size_t>(n)] + i * stride_l;
    if (keep) {
      const bool* mp = m.data_ptr<bool>() + base;
      for (int64_t j = 0; j < S; ++j)
        if (!mp[j * stride_s]) s[j] = kNegInf<float>;
    } else {
      const float* mp = m.data_ptr<float>() + base;
      for (int64_t j = 0; j < S; ++j) s[j] += mp[j * stride_s];
    }
  }
};

// Row i of head n: softmax with its lse, times the dropout multipliers, rounded to bf16 into p16.
void weights_row(const kernels::SdpaProblem& pr, int64_t n, int64_t i, float* s, bfloat16* p16,
                 float* lse, std::vector<uint32_t>& words) {
  const int64_t S = pr.S;
  float mx = kNegInf<float>;
  for (int64_t j = 0; j < S; ++j) mx = std::max(mx, s[j]);
  if (mx == kNegInf<float>) {  // every key hidden: a zero row, lse = -inf (the fused kernel's)
    std::fill(p16, p16 + S, bfloat16(0.0f));
    *lse = kNegInf<float>;
    return;
  }
  double sum = 0;
  for (int64_t j = 0; j < S; ++j) {
    s[j] = vec_math::exp_t<float>(s[j] - mx);
    sum += static_cast<double>(s[j]);
  }
  *lse = mx + static_cast<float>(std::log(sum));
  const auto inv = static_cast<float>(1.0 / sum);
  if (pr.p == 0) {
    for (int64_t j = 0; j < S; ++j) p16[j] = bfloat16(s[j] * inv);
    return;
  }
  // Element e = (n L + i) S + j uses word e % 4 of Philox block first + e / 4.
  const auto e0 = static_cast<uint64_t>((n * pr.L + i) * S);
  const auto skip = static_cast<int64_t>(e0 % 4);
  words.resize(static_cast<size_t>(skip + S + 8));
  Generator(pr.seed).blocks(pr.first + e0 / 4, (skip + S + 3) / 4, words.data());
  const auto threshold = static_cast<uint64_t>(std::ceil(pr.p * 0x1.0p32));
  const float keep = pr.p < 1 ? static_cast<float>(1.0 / (1.0 - pr.p)) : 0.0f;
  for (int64_t j = 0; j < S; ++j) {
    const bool kept = static_cast<uint64_t>(words[static_cast<size_t>(skip + j)]) >= threshold;
    p16[j] = bfloat16(kept ? s[j] * inv * keep : 0.0f);
  }
}

}  // namespace

void sdpa_forward_bf16(const Tensor& q16, const Tensor& k16, const Tensor& v16, const Tensor& mask,
                       const kernels::SdpaProblem& pr, const Tensor& out, const Tensor& lse) {
  const int64_t L = pr.L, S = pr.S, E = pr.E, Ev = pr.Ev;
  if (pr.N == 0 || L == 0) return;
  float* o = out.data_ptr<float>();
  if (S == 0) {  // no keys: zero rows, as the fused kernel gives
    std::fill(o, o + pr.N * L * Ev, 0.0f);
    std::fill(lse.data_ptr<float>(), lse.data_ptr<float>() + pr.N * L, kNegInf<float>);
    return;
  }
  const MaskRows mask_rows(mask, q16, pr);
  const int64_t heads = std::clamp<int64_t>(kChunkScores / std::max<int64_t>(L * S, 1), 1, pr.N);
  std::vector<float> scores(static_cast<size_t>(heads * L * S));
  std::vector<bfloat16> weights(static_cast<size_t>(heads * L * S));
  for (int64_t n0 = 0; n0 < pr.N; n0 += heads) {
    const int64_t hc = std::min(heads, pr.N - n0);
    onednn::Bf16Matmul qk = onednn::Bf16Matmul::dense(hc, L, S, E, false, true);
    onednn::matmul_bf16(qk, bits(q16) + n0 * L * E, bits(k16) + n0 * S * E, scores.data());
    parallel_for(hc * L, S * 8, [&](int64_t r0, int64_t r1) {
      std::vector<uint32_t> words;
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = n0 + r / L, i = r % L;
        float* s = scores.data() + r * S;
        const auto scale = static_cast<float>(pr.scale);
        for (int64_t j = 0; j < S; ++j) s[j] *= scale;
        mask_rows.apply(n, i, S, s);
        if (pr.causal)
          for (int64_t j = i + 1; j < S; ++j) s[j] = kNegInf<float>;
        weights_row(pr, n, i, s, weights.data() + r * S, lse.data_ptr<float>() + n * L + i, words);
      }
    });
    onednn::Bf16Matmul pv = onednn::Bf16Matmul::dense(hc, L, Ev, S);
    onednn::matmul_bf16(pv, reinterpret_cast<const uint16_t*>(weights.data()),
                        bits(v16) + n0 * S * Ev, o + n0 * L * Ev);
  }
}

}  // namespace nabla::detail
