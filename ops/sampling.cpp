// multinomial (a kernel over rows, drawing from Philox counters) and the logit filters (ops
// composed: the kept logits pass through masked_fill, so their gradient is the identity).
#include "nabla/ops/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/pointwise.h"
#include "nabla/ops/reduce_dim.h"
#include "nabla/ops/softmax.h"
#include "nabla/ops/sort.h"

namespace nabla {
namespace {

// Every row of the (B, V) weights as double, checked: finite, >= 0, not all zero; and, without
// replacement, at least num_samples non-zero weights in every row.
std::vector<double> checked_weights(const Tensor& probs, int64_t rows, int64_t v, int64_t n,
                                    bool replacement) {
  const std::vector<double> w = probs.detach().to(kFloat64).contiguous().to_vector<double>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t nonzero = 0;
    for (int64_t i = 0; i < v; ++i) {
      const double x = w[static_cast<size_t>(r * v + i)];
      if (!std::isfinite(x) || x < 0)
        throw ValueError(
            fmt::format("multinomial: probs of shape {} hold {} at row {}, column "
                        "{}; weights must be finite and >= 0",
                        shape_str(probs.shape()), x, r, i));
      nonzero += x > 0;
    }
    if (nonzero == 0)
      throw ValueError(
          fmt::format("multinomial: row {} of probs (shape {}) is all zero; a row "
                      "needs a positive weight",
                      r, shape_str(probs.shape())));
    if (!replacement && nonzero < n)
      throw ValueError(
          fmt::format("multinomial: cannot draw {} samples without replacement from "
                      "row {} of probs (shape {}), which has {} non-zero weights",
                      n, r, shape_str(probs.shape()), nonzero));
  }
  return w;
}

// With replacement: draw s of a row is the first i whose running sum exceeds u_s * total, with
// u_s the uniform of counter first + s (inverse-CDF sampling). A weight of 0 adds nothing to the
// running sum, so it is never drawn.
void draw_with_replacement(const Generator& gen, uint64_t first, const double* w, int64_t v,
                           int64_t n, int64_t* out, std::vector<double>& cdf) {
  std::partial_sum(w, w + v, cdf.begin());
  const double total = cdf[static_cast<size_t>(v - 1)];
  int64_t last_positive = v - 1;
  while (w[last_positive] == 0) --last_positive;
  for (int64_t s = 0; s < n; ++s) {
    const double u = gen.uniform(first + static_cast<uint64_t>(s)) * total;
    const auto i = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    // u * total can round up to total: then the last positive weight is the draw.
    out[s] = std::min<int64_t>(i, last_positive);
  }
}

// Without replacement: the exponential race (Efraimidis and Spirakis, "Weighted random sampling
// with a reservoir", Inf. Process. Lett. 97(5), 2006). Item i gets the key E_i / w_i with E_i
// exponential (from counter first + i); the n smallest keys, in increasing order, are
// distributed as n successive draws each proportional to the weights not yet drawn.
void draw_without_replacement(const Generator& gen, uint64_t first, const double* w, int64_t v,
                              int64_t n, int64_t* out, std::vector<double>& key,
                              std::vector<int64_t>& pos) {
  for (int64_t i = 0; i < v; ++i) {
    // u in (0, 1], so -log(u) is finite; a zero weight never wins.
    const double u = 1.0 - gen.uniform(first + static_cast<uint64_t>(i));
    key[static_cast<size_t>(i)] = w[i] > 0 ? -std::log(u) / w[i] : INFINITY;
  }
  std::iota(pos.begin(), pos.end(), int64_t{0});
  std::partial_sort(pos.begin(), pos.begin() + n, pos.end(), [&](int64_t a, int64_t b) {
    const double ka = key[static_cast<size_t>(a)], kb = key[static_cast<size_t>(b)];
    return ka < kb || (ka == kb && a < b);
  });
  std::copy(pos.begin(), pos.begin() + n, out);
}

void check_logits(const char* op, const Tensor& logits) {
  if (!is_floating(logits.dtype()))
    throw DTypeError(fmt::format("{}: logits must be float32 or float64, got {} (shape {})", op,
                                 dtype_name(logits.dtype()), shape_str(logits.shape())));
  if (logits.dim() == 0)
    throw ShapeError(
        fmt::format("{}: logits are 0-d; expects (V) or (B, V), filtered along the "
                    "last dim",
                    op));
}

}  // namespace

// ----------------------------------------------------------------------------
// multinomial: int64 draws, nothing recorded
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator& gen) {
  inspect::OpScope op_scope("multinomial", {&probs});
  inspect::note_non_differentiable("multinomial", {&probs});
  if (!is_floating(probs.dtype()))
    throw DTypeError(
        fmt::format("multinomial: probs must be float32 or float64, got {} (shape "
                    "{})",
                    dtype_name(probs.dtype()), shape_str(probs.shape())));
  if (probs.dim() != 1 && probs.dim() != 2)
    throw ShapeError(fmt::format("multinomial: probs must be (V) or (B, V), got shape {}",
                                 shape_str(probs.shape())));
  if (num_samples <= 0)
    throw ValueError(
        fmt::format("multinomial: num_samples must be >= 1, got {} (probs of shape {})",
                    num_samples, shape_str(probs.shape())));
  const int64_t rows = probs.dim() == 2 ? probs.size(0) : 1, v = probs.size(-1);
  if (v == 0)
    throw ValueError(
        fmt::format("multinomial: probs of shape {} have no categories", shape_str(probs.shape())));
  const std::vector<double> w = checked_weights(probs, rows, v, num_samples, replacement);

  Tensor out = empty(probs.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples}, kInt64);
  const int64_t per_row = replacement ? num_samples : v;
  const uint64_t first = gen.advance(static_cast<uint64_t>(rows * per_row));
  int64_t* draws = out.data_ptr<int64_t>();
  parallel_for(rows, per_row * 40, [&](int64_t b, int64_t e) {
    std::vector<double> scratch(static_cast<size_t>(v));
    std::vector<int64_t> pos(replacement ? 0 : static_cast<size_t>(v));
    for (int64_t r = b; r < e; ++r) {
      const uint64_t row_first = first + static_cast<uint64_t>(r * per_row);
      const double* wr = w.data() + r * v;
      if (replacement)
        draw_with_replacement(gen, row_first, wr, v, num_samples, draws + r * num_samples, scratch);
      else
        draw_without_replacement(gen, row_first, wr, v, num_samples, draws + r * num_samples,
                                 scratch, pos);
    }
  });
  return out;
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  return multinomial(probs, num_samples, replacement, default_generator());
}

// ----------------------------------------------------------------------------
// apply_temperature
//   forward:   y = logits / temperature       backward: div's (grad / temperature)
Tensor apply_temperature(const Tensor& logits, double temperature) {
  inspect::OpScope op_scope("apply_temperature", {&logits});
  if (!is_floating(logits.dtype()))
    throw DTypeError(
        fmt::format("apply_temperature: logits must be float32 or float64, got {} "
                    "(shape {})",
                    dtype_name(logits.dtype()), shape_str(logits.shape())));
  if (!(temperature > 0) || !std::isfinite(temperature))
    throw ValueError(
        fmt::format("apply_temperature: temperature must be finite and > 0, got {}", temperature));
  return div(logits, temperature);
}

// ----------------------------------------------------------------------------
// top_k_filter
//   forward:   y = logits where logits >= (k-th largest of the row), else -inf
//   backward:  masked_fill's: grad where kept, 0 where removed
Tensor top_k_filter(const Tensor& logits, int64_t k) {
  inspect::OpScope op_scope("top_k_filter", {&logits});
  check_logits("top_k_filter", logits);
  if (k < 1)
    throw ValueError(fmt::format("top_k_filter: k must be >= 1, got {} (logits of shape {})", k,
                                 shape_str(logits.shape())));
  const int64_t v = logits.size(-1);
  const int64_t kept = std::min(k, v);
  Tensor remove = zeros(logits.shape(), kBool);
  if (kept > 0) {
    NoGradGuard no_grad;
    const Tensor x = logits.detach();
    const Tensor kth = topk(x, kept, -1).values.narrow(-1, kept - 1, 1);
    remove = lt(x, kth);
  }
  return masked_fill(logits, remove, -INFINITY);
}

// ----------------------------------------------------------------------------
// top_p_filter (transformers' TopPLogitsWarper, min_tokens_to_keep = 1)
//   forward:   in ascending sorted order, remove where cumsum(softmax(sorted)) <= 1 - p, never the
//              last (largest); y = logits with the removed ones at -inf
//   backward:  masked_fill's: grad where kept, 0 where removed
Tensor top_p_filter(const Tensor& logits, double p) {
  inspect::OpScope op_scope("top_p_filter", {&logits});
  check_logits("top_p_filter", logits);
  if (!(p > 0 && p <= 1))
    throw ValueError(fmt::format("top_p_filter: p must be in (0, 1], got {} (logits of shape {})",
                                 p, shape_str(logits.shape())));
  const int64_t v = logits.size(-1);
  Tensor remove = zeros(logits.shape(), kBool);
  if (v > 0) {
    NoGradGuard no_grad;
    const ValuesIndices ascending = sort(logits.detach(), -1);
    const Tensor running = cumsum(softmax(ascending.values, -1), -1);
    Tensor remove_sorted = le(running, 1.0 - p);
    remove_sorted.narrow(-1, v - 1, 1).fill_(0.0);  // the most likely token stays
    // Back to the logits' order: position indices[j] gets sorted entry j.
    remove = ne(
        scatter_add(zeros(logits.shape(), kInt64), -1, ascending.indices, remove_sorted.to(kInt64)),
        0.0);
  }
  return masked_fill(logits, remove, -INFINITY);
}

}  // namespace nabla
