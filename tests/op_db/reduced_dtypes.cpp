// The op database's bfloat16 / float16 sweep (test_op_db.cpp runs it on every sample that is not
// big and holds in float32). An op that takes these dtypes (ops/reduced_float.h: float32 compute,
// one rounding) gives its float32 result on the same rounded inputs within 2u relative, plus 4u
// of the output's largest magnitude (an op built from other ops rounds each intermediate, and an
// element that cancels keeps its larger terms' rounding); u = 2^-8 (bfloat16), 2^-11 (float16).
// Elements past the dtype's range in float32 are skipped (they overflow, as they must). An op
// that refuses them must throw a DTypeError naming the op.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

// Known exceptions, each with its reason (fixing them belongs to the ops' own files).
// Refusals that come from the op the entry is built on, naming that op (still a DTypeError):
const std::set<std::string> kRefusalNamesInnerOp = {"linear_activation",
                                                    "cross_entropy_composite",
                                                    "avg_pool1d",
                                                    "avg_pool2d",
                                                    "adaptive_avg_pool1d",
                                                    "adaptive_avg_pool2d",
                                                    "top_k_filter",
                                                    "top_p_filter",
                                                    "scaled_dot_product_attention_composite",
                                                    "normalize"};
// Values not compared: composite twins round every intermediate to the storage dtype, so a
// normalisation's x - mean or a log ratio cancels to a few percent; cosine_similarity's clamped
// norm of tiny vectors leaves float16's range, and normalize's eps (1e-12, below float16's
// smallest subnormal) gives NaN for a zero row in float16.
const std::set<std::string> kRoundsIntermediates = {"layer_norm_composite", "group_norm_composite",
                                                    "kl_div_composite", "cosine_similarity",
                                                    "normalize"};

}  // namespace

std::string reduced_dtype_failure(const OpInfo& op, const Sample& s, DType dt) {
  NoGradGuard no_grad;
  std::vector<Tensor> low, wide;  // the data arguments rounded to dt, and those values in float32
  for (const Arg& a : s.args) {
    low.push_back(a.is_data() ? a.leaf.detach().to(dt) : a.leaf);
    wide.push_back(a.is_data() ? low.back().to(kFloat32) : a.leaf);
  }
  Tensor out;
  try {
    out = s.call(low);
  } catch (const DTypeError& e) {
    if (std::find(op.dtypes.begin(), op.dtypes.end(), dt) != op.dtypes.end())
      return std::string("refused a dtype the entry lists: ") + e.what();
    if (!names_op(e.what(), op.name) && !kRefusalNamesInnerOp.count(op.name))
      return std::string("message does not name the op: ") + e.what();
    return "";
  }
  if (kRoundsIntermediates.count(op.name)) return "";
  const Tensor ref = s.call(wide);
  if (out.shape() != ref.shape())
    return fmt::format("shape {} vs {}", shape_str(out.shape()), shape_str(ref.shape()));
  const auto o = out.to(kFloat64).contiguous().to_vector<double>();
  const auto r = ref.to(kFloat64).contiguous().to_vector<double>();
  if (!is_floating(ref.dtype())) {
    for (size_t i = 0; i < o.size(); ++i)
      if (o[i] != r[i]) return fmt::format("element {}: {} vs {}", i, o[i], r[i]);
    return "";
  }
  const double u = dt == kBFloat16 ? 0x1p-8 : 0x1p-11;
  const double range = dt == kBFloat16 ? 3.38e38 : 65504.0;
  double largest = 0;
  for (double v : r)
    if (std::isfinite(v) && std::abs(v) <= range) largest = std::max(largest, std::abs(v));
  for (size_t i = 0; i < o.size(); ++i) {
    if (std::isnan(r[i]) || std::abs(r[i]) > range) continue;  // NaN in float32 too, or overflow
    if (std::isnan(o[i]) || std::abs(o[i] - r[i]) > 4 * u * largest + 2 * u * std::abs(r[i]))
      return fmt::format("element {}: {:.9g} vs float32 {:.9g} (2u {:.3g} relative + {:.3g})", i,
                         o[i], r[i], 2 * u, 4 * u * largest);
  }
  return "";
}

}  // namespace nabla::op_db
