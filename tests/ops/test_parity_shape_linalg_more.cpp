// Forward and backward of the ops of shape_more.h, reduce_more.h, scatter.h, linalg_more.h,
// einsum.h and interpolate.h against PyTorch (fixtures from
// tests/fixtures/gen_shape_linalg_more.py). Each case applies the same op as the script.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
const char* kFamily = "shape_linalg_more";
}  // namespace

TEST_CASE("parity: flip roll tile unbind movedim", "[ops][parity]") {
  check_parity(kFamily, "flip", [](auto& x) { return flip(x[0], {0, 2}); });
  check_parity(kFamily, "flip_last", [](auto& x) { return flip(x[0].t(), {-1}); });
  check_parity(kFamily, "roll", [](auto& x) { return roll(x[0], {1, -2}, {0, 2}); });
  check_parity(kFamily, "roll_flat", [](auto& x) { return roll(x[0], {4}); });
  check_parity(kFamily, "tile", [](auto& x) { return tile(x[0], {2}); });
  check_parity(kFamily, "tile_more", [](auto& x) { return tile(x[0], {2, 1, 3}); });
  check_parity(kFamily, "unbind", [](auto& x) {
    auto p = unbind(x[0], 1);
    return add(mul(p[2], p[0]), p[1]);
  });
  check_parity(kFamily, "movedim", [](auto& x) {
    return mul(movedim(x[0], {0, 3}, {2, 0}).reshape({-1}), 1.0);
  });
  check_parity(kFamily, "movedim_one", [](auto& x) { return mul(movedim(x[0], -1, 0), 1.0); });
}

TEST_CASE("parity: prod amax amin", "[ops][parity]") {
  check_parity(kFamily, "prod_all", [](auto& x) { return prod(x[0]); });
  check_parity(kFamily, "prod_dim", [](auto& x) { return prod(x[0], 1); });
  check_parity(kFamily, "prod_keepdim", [](auto& x) { return prod(x[0], 0, true); });
  check_parity(kFamily, "prod_one_zero", [](auto& x) { return prod(x[0], 1); });
  check_parity(kFamily, "prod_two_zeros", [](auto& x) { return prod(x[0], 1); });
  check_parity(kFamily, "prod_all_zero", [](auto& x) { return prod(x[0]); });
  check_parity(kFamily, "amax_dims", [](auto& x) { return amax(x[0], {0, 2}); });
  check_parity(kFamily, "amax_ties", [](auto& x) { return amax(x[0], {1}); });
  check_parity(kFamily, "amax_all_ties", [](auto& x) { return amax(x[0]); });
  check_parity(kFamily, "amin_keepdim", [](auto& x) { return amin(x[0], {-1}, true); });
  check_parity(kFamily, "amin_ties", [](auto& x) { return amin(x[0], {0}); });
}

TEST_CASE("parity: scatter masked_select", "[ops][parity]") {
  check_parity(kFamily, "scatter", [](auto& x) { return scatter(x[0], 0, x[1], x[2]); });
  check_parity(kFamily, "scatter_dim1_small", [](auto& x) { return scatter(x[0], 1, x[1], x[2]); });
  check_parity(kFamily, "scatter_value", [](auto& x) { return scatter(x[0], 1, x[1], 2.5); });
  check_parity(kFamily, "masked_select", [](auto& x) { return masked_select(x[0], x[1]); });
  check_parity(kFamily, "masked_select_bcast", [](auto& x) { return masked_select(x[0], x[1]); });
}

TEST_CASE("parity: bmm baddbmm addmm outer", "[ops][parity]") {
  check_parity(kFamily, "bmm", [](auto& x) { return bmm(x[0], x[1]); });
  check_parity(kFamily, "baddbmm", [](auto& x) { return baddbmm(x[0], x[1], x[2], 0.5, 2.0); });
  check_parity(kFamily, "addmm", [](auto& x) { return addmm(x[0], x[1], x[2], -1.5, 0.25); });
  check_parity(kFamily, "addmm_beta0", [](auto& x) { return addmm(x[0], x[1], x[2], 0.0); });
  check_parity(kFamily, "outer", [](auto& x) { return outer(x[0], x[1]); });
}

TEST_CASE("parity: einsum", "[ops][parity]") {
  check_parity(kFamily, "einsum_matmul", [](auto& x) { return einsum("ij,jk->ik", {x[0], x[1]}); });
  check_parity(kFamily, "einsum_batch", [](auto& x) {
    return einsum("bij,bjk->bik", {x[0], x[1]});
  });
  check_parity(kFamily, "einsum_transpose", [](auto& x) { return einsum("ij->ji", {x[0]}); });
  check_parity(kFamily, "einsum_sum", [](auto& x) { return einsum("ijk->j", {x[0]}); });
  check_parity(kFamily, "einsum_outer", [](auto& x) { return einsum("i,j", {x[0], x[1]}); });
  check_parity(kFamily, "einsum_dot", [](auto& x) { return einsum("i,i->", {x[0], x[1]}); });
  check_parity(kFamily, "einsum_trace", [](auto& x) { return einsum("ii", {x[0]}); });
  check_parity(kFamily, "einsum_diag", [](auto& x) { return einsum("ii->i", {x[0]}); });
  check_parity(kFamily, "einsum_attention", [](auto& x) {
    return einsum("bhqd,bhkd->bhqk", {x[0], x[1]});
  });
  check_parity(kFamily, "einsum_ellipsis", [](auto& x) {
    return einsum("...ij,...jk->...ik", {x[0], x[1]});
  });
  check_parity(kFamily, "einsum_three", [](auto& x) {
    return einsum("ij,jk,kl->il", {x[0], x[1], x[2]});
  });
  check_parity(kFamily, "einsum_mixed", [](auto& x) {
    return einsum("bij,jk->bki", {x[0], x[1]});
  });
  check_parity(kFamily, "einsum_implicit_order", [](auto& x) {
    return einsum("ba,cb", {x[0], x[1]});
  });
  check_parity(kFamily, "einsum_broadcast_one", [](auto& x) {
    return einsum("ij,ij->ij", {x[0], x[1]});
  });
}

TEST_CASE("parity: cosine_similarity normalize", "[ops][parity]") {
  check_parity(kFamily, "cosine_similarity", [](auto& x) { return cosine_similarity(x[0], x[1]); });
  check_parity(kFamily, "cosine_similarity_bcast",
               [](auto& x) { return cosine_similarity(x[0], x[1], -1); });
  check_parity(kFamily, "cosine_similarity_tiny",
               [](auto& x) { return cosine_similarity(x[0], x[1], 1); });
  check_parity(kFamily, "normalize", [](auto& x) { return normalize(x[0]); });
  check_parity(kFamily, "normalize_p1", [](auto& x) { return normalize(x[0], 1.0, 0); });
  check_parity(kFamily, "normalize_p3", [](auto& x) { return normalize(x[0], 3.0, -1); });
  check_parity(kFamily, "normalize_inf", [](auto& x) { return normalize(x[0], INFINITY, 1); });
  check_parity(kFamily, "normalize_zero_row", [](auto& x) { return normalize(x[0], 3.0, 1); });
}

TEST_CASE("parity: interpolate", "[ops][parity]") {
  check_parity(kFamily, "nearest_size", [](auto& x) {
    return interpolate(x[0], {.size = {7, 3}});
  });
  check_parity(kFamily, "nearest_double",
               [](auto& x) { return interpolate(x[0], {.scale_factor = {2.0}}); });
  check_parity(kFamily, "nearest_factor", [](auto& x) {
    return interpolate(x[0], {.scale_factor = {1.5, 0.7}});
  });
  for (bool ac : {false, true}) {
    const std::string tag = ac ? "ac" : "noac";
    check_parity(kFamily, "bilinear_size_" + tag, [ac](auto& x) {
      return interpolate(x[0], {.size = {7, 3}, .mode = "bilinear", .align_corners = ac});
    });
    check_parity(kFamily, "bilinear_factor_" + tag, [ac](auto& x) {
      return interpolate(x[0],
                         {.scale_factor = {2.5, 1.3}, .mode = "bilinear", .align_corners = ac});
    });
    check_parity(kFamily, "bilinear_down_" + tag, [ac](auto& x) {
      return interpolate(x[0], {.size = {2, 1}, .mode = "bilinear", .align_corners = ac});
    });
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
