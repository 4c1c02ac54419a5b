// topk/sort/argsort and the sampling filters against PyTorch (fixtures from
// tests/fixtures/gen_sort.py; the filters there are transformers' TopK/TopPLogitsWarper). Each
// case applies the same op as the script; index outputs are compared as values.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

TEST_CASE("parity: sort and argsort (stable, ties and NaN)", "[ops][parity]") {
  check_parity("sort", "sort_last", [](auto& x) { return sort(x[0]).values; });
  check_parity("sort", "sort_desc_dim1", [](auto& x) { return sort(x[0], 1, true).values; });
  check_parity("sort", "sort_t_dim0", [](auto& x) { return sort(x[0].t(), 0).values; });
  check_parity("sort", "sort_ties", [](auto& x) { return sort(x[0], -1).values; });
  check_parity("sort", "sort_ties_indices", [](auto& x) { return sort(x[0], -1).indices; });
  check_parity("sort", "sort_ties_desc_indices",
               [](auto& x) { return sort(x[0], 0, true).indices; });
  check_parity("sort", "sort_nan_indices", [](auto& x) { return sort(x[0], -1).indices; });
  check_parity("sort", "sort_nan_desc_indices",
               [](auto& x) { return sort(x[0], -1, true).indices; });
  check_parity("sort", "argsort_ties", [](auto& x) { return argsort(x[0], 1); });
  check_parity("sort", "argsort_desc_dim0", [](auto& x) { return argsort(x[0], 0, true); });
}

TEST_CASE("parity: topk", "[ops][parity]") {
  check_parity("sort", "topk_last", [](auto& x) { return topk(x[0], 3).values; });
  check_parity("sort", "topk_smallest_dim0",
               [](auto& x) { return topk(x[0], 2, 0, false).values; });
  check_parity("sort", "topk_k_eq_n", [](auto& x) { return topk(x[0], 6, 1).values; });
  check_parity("sort", "topk_t", [](auto& x) { return topk(x[0].t(), 2, -1).values; });
  check_parity("sort", "topk_indices", [](auto& x) { return topk(x[0], 4, -1).indices; });
  check_parity("sort", "topk_smallest_indices",
               [](auto& x) { return topk(x[0], 3, 0, false).indices; });
}

TEST_CASE("parity: temperature, top-k and top-p filters as transformers' warpers",
          "[ops][parity]") {
  check_parity("sort", "temperature", [](auto& x) { return apply_temperature(x[0], 0.7); });
  check_parity("sort", "top_k_filter_probs",
               [](auto& x) { return softmax(top_k_filter(x[0], 3), -1); });
  check_parity("sort", "top_k_filter_out", [](auto& x) { return top_k_filter(x[0], 2); });
  check_parity("sort", "top_k_filter_ties_out", [](auto& x) { return top_k_filter(x[0], 2); });
  check_parity("sort", "top_k_filter_1d_probs",
               [](auto& x) { return softmax(top_k_filter(x[0], 4), -1); });
  for (double p : {0.3, 0.75, 0.9}) {
    const std::string tag = p == 0.3 ? "03" : p == 0.75 ? "075" : "09";
    check_parity("sort", "top_p_" + tag + "_probs",
                 [p](auto& x) { return softmax(top_p_filter(x[0], p), -1); });
    check_parity("sort", "top_p_" + tag + "_out", [p](auto& x) { return top_p_filter(x[0], p); });
  }
  check_parity("sort", "top_p_1_out", [](auto& x) { return top_p_filter(x[0], 1.0); });
  check_parity("sort", "pipeline_probs", [](auto& x) {
    return softmax(top_p_filter(top_k_filter(apply_temperature(x[0], 0.8), 5), 0.75), -1);
  });
}

// check_parity's closeness passes -inf against -inf; the filtered positions must match exactly.
TEST_CASE("parity: the filters remove exactly PyTorch's positions", "[ops][parity]") {
  const auto& f = test::fixture("sort");
  auto removed = [](const Tensor& t) { return eq(t, -INFINITY).to(kInt64).to_vector<int64_t>(); };
  for (DType dt : {kFloat64, kFloat32}) {
    const std::string suffix = dt == kFloat64 ? "" : "_f32";
    const Tensor a = f.at("top_k_filter_ties_out.in0").to(dt);
    CHECK(removed(top_k_filter(a, 2)) == removed(f.at("top_k_filter_ties_out.out" + suffix)));
    for (const char* tag : {"03", "075", "09"}) {
      const double p = std::string(tag) == "03" ? 0.3 : std::string(tag) == "075" ? 0.75 : 0.9;
      const std::string name = std::string("top_p_") + tag + "_out";
      INFO(name << " " << dtype_name(dt));
      CHECK(removed(top_p_filter(f.at(name + ".in0").to(dt), p)) ==
            removed(f.at(name + ".out" + suffix)));
    }
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
