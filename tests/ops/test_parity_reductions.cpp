// Forward and backward of max/min/argmax/argmin/cumsum and var/std/logsumexp/norm against
// PyTorch (fixtures from tests/fixtures/gen_reductions.py). Each case applies the same op as the
// script; index outputs are compared as values.
#include <limits>

#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

TEST_CASE("parity: max and min", "[ops][parity]") {
  for (bool is_max : {true, false}) {
    const std::string op = is_max ? "max" : "min";
    auto along = [is_max](const Tensor& x, int64_t dim, bool keepdim) {
      return is_max ? max(x, dim, keepdim) : min(x, dim, keepdim);
    };
    auto all = [is_max](const Tensor& x) { return is_max ? max(x) : min(x); };
    check_parity("reductions", op + "_dim", [&](auto& x) { return along(x[0], 1, false).values; });
    check_parity("reductions", op + "_dim_keepdim",
                 [&](auto& x) { return along(x[0], -1, true).values; });
    check_parity("reductions", op + "_dim_t",
                 [&](auto& x) { return along(x[0].t(), 0, false).values; });
    check_parity("reductions", op + "_dim_ties",
                 [&](auto& x) { return along(x[0], 1, false).values; });
    check_parity("reductions", op + "_dim_ties_indices",
                 [&](auto& x) { return along(x[0], 1, false).indices; });
    check_parity("reductions", op + "_all", [&](auto& x) { return all(x[0]); });
    check_parity("reductions", op + "_all_ties", [&](auto& x) { return all(x[0]); });
  }
}

TEST_CASE("parity: argmax and argmin", "[ops][parity]") {
  check_parity("reductions", "argmax_dim", [](auto& x) { return argmax(x[0], 0); });
  check_parity("reductions", "argmin_dim", [](auto& x) { return argmin(x[0], 0); });
  check_parity("reductions", "argmax_dim_keepdim", [](auto& x) { return argmax(x[0], 1, true); });
  check_parity("reductions", "argmin_dim_keepdim", [](auto& x) { return argmin(x[0], 1, true); });
  check_parity("reductions", "argmax_all", [](auto& x) { return argmax(x[0]); });
  check_parity("reductions", "argmin_all", [](auto& x) { return argmin(x[0]); });
}

TEST_CASE("parity: cumsum", "[ops][parity]") {
  check_parity("reductions", "cumsum_dim0", [](auto& x) { return cumsum(x[0], 0); });
  check_parity("reductions", "cumsum_last", [](auto& x) { return cumsum(x[0], -1); });
  check_parity("reductions", "cumsum_t", [](auto& x) { return cumsum(x[0].t(), 1); });
}

TEST_CASE("parity: var and std", "[ops][parity]") {
  check_parity("reductions", "var_dims", [](auto& x) { return var(x[0], {0, 2}); });
  check_parity("reductions", "var_biased_keepdim",
               [](auto& x) { return var(x[0], {1}, false, true); });
  check_parity("reductions", "var_all", [](auto& x) { return var(x[0]); });
  check_parity("reductions", "var_offset", [](auto& x) { return var(add(x[0], 1e3), {1}); });
  check_parity("reductions", "std_dims", [](auto& x) { return nabla::std(x[0], {0, 2}); });
  check_parity("reductions", "std_biased_keepdim",
               [](auto& x) { return nabla::std(x[0], {-1}, false, true); });
  check_parity("reductions", "std_all", [](auto& x) { return nabla::std(x[0]); });
  check_parity("reductions", "std_const_row", [](auto& x) { return nabla::std(x[0], {1}); });
}

TEST_CASE("parity: logsumexp", "[ops][parity]") {
  check_parity("reductions", "logsumexp_dim", [](auto& x) { return logsumexp(x[0], {1}); });
  check_parity("reductions", "logsumexp_dims_keepdim", [](auto& x) {
    return logsumexp(x[0], {0, 2}, true);
  });
  check_parity("reductions", "logsumexp_t", [](auto& x) { return logsumexp(x[0].t(), {1}); });
  // logits ~1e4: finite, and equal to PyTorch's at the default tolerances
  check_parity("reductions", "logsumexp_large", [](auto& x) { return logsumexp(x[0], {1}); });
  check_parity("reductions", "logsumexp_large_neg", [](auto& x) { return logsumexp(x[0], {1}); });
  check_parity("reductions", "logsumexp_inf", [](auto& x) { return logsumexp(x[0], {1}); });
}

TEST_CASE("parity: norm", "[ops][parity]") {
  check_parity("reductions", "norm2_dim", [](auto& x) { return norm(x[0], 2.0, {1}); });
  check_parity("reductions", "norm2_dims_keepdim", [](auto& x) {
    return norm(x[0], 2.0, {0, 2}, true);
  });
  check_parity("reductions", "norm2_all", [](auto& x) { return norm(x[0]); });
  check_parity("reductions", "norm2_zero_row", [](auto& x) { return norm(x[0], 2.0, {1}); });
  check_parity("reductions", "norminf_dim", [](auto& x) { return norm(x[0], kInf, {1}); });
  check_parity("reductions", "norminf_all", [](auto& x) { return norm(x[0], kInf); });
  check_parity("reductions", "norminf_ties", [](auto& x) { return norm(x[0], kInf, {1}); });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
