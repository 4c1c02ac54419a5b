// Forward and backward of the softmax family, the losses, layer_norm and linear against PyTorch
// (fixtures from tests/fixtures/gen_softmax_loss_norm.py). Each case applies the same op as the
// script; integer and bool inputs (targets, lengths, masks) pass through unchanged.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
const std::string kFamily = "softmax_loss_norm";
}

TEST_CASE("parity: softmax and log_softmax", "[ops][parity]") {
  for (auto [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, int64_t)>>{
           {"softmax", softmax}, {"log_softmax", log_softmax}}) {
    check_parity(kFamily, name + "_last", [f](auto& x) { return f(x[0], -1); });
    check_parity(kFamily, name + "_dim0", [f](auto& x) { return f(x[0], 0); });
    check_parity(kFamily, name + "_mid", [f](auto& x) { return f(x[0], 1); });
    check_parity(kFamily, name + "_t", [f](auto& x) { return f(x[0].t(), 1); });
    check_parity(kFamily, name + "_big", [f](auto& x) { return f(mul(x[0], 30.0), -1); });
  }
}

TEST_CASE("parity: masked_softmax", "[ops][parity]") {
  for (std::string c : {"masked_lens1d", "masked_lens2d", "masked_lens1d_4d"})
    check_parity(kFamily, c, [](auto& x) { return masked_softmax(x[0], x[1]); });
  check_parity(kFamily, "masked_bool",
               [](auto& x) { return masked_softmax(x[0], x[1], MaskKind::Bool); });
  check_parity(kFamily, "masked_additive",
               [](auto& x) { return masked_softmax(x[0], x[1], MaskKind::Additive); });
}

TEST_CASE("parity: cross_entropy and nll_loss", "[ops][parity]") {
  for (std::string c : {"ce_basic", "ce_ignore", "ce_unbatched"})
    check_parity(kFamily, c, [](auto& x) { return cross_entropy(x[0], x[1]); });
  check_parity(kFamily, "ce_smooth_ignore",
               [](auto& x) { return cross_entropy(x[0], x[1], {.label_smoothing = 0.1}); });
  check_parity(kFamily, "ce_3d_sum",
               [](auto& x) { return cross_entropy(x[0], x[1], {.reduction = Reduction::Sum}); });
  check_parity(kFamily, "ce_4d_none", [](auto& x) {
    return cross_entropy(x[0], x[1], {.label_smoothing = 0.2, .reduction = Reduction::None});
  });
  check_parity(kFamily, "ce_probs", [](auto& x) {
    return cross_entropy(x[0], softmax(x[1], -1), {.label_smoothing = 0.1});
  });
  check_parity(kFamily, "ce_probs_3d_none",
               [](auto& x) { return cross_entropy(x[0], x[1], {.reduction = Reduction::None}); });
  check_parity(kFamily, "nll_basic", [](auto& x) { return nll_loss(x[0], x[1]); });
  check_parity(kFamily, "nll_ignore_3d", [](auto& x) { return nll_loss(x[0], x[1]); });
  check_parity(kFamily, "nll_none",
               [](auto& x) { return nll_loss(x[0], x[1], {.reduction = Reduction::None}); });
}

TEST_CASE("parity: mse_loss and binary_cross_entropy_with_logits", "[ops][parity]") {
  check_parity(kFamily, "mse_mean", [](auto& x) { return mse_loss(x[0], x[1]); });
  check_parity(kFamily, "mse_sum", [](auto& x) { return mse_loss(x[0], x[1], Reduction::Sum); });
  check_parity(kFamily, "mse_none", [](auto& x) { return mse_loss(x[0], x[1], Reduction::None); });
  check_parity(kFamily, "bce_mean",
               [](auto& x) { return binary_cross_entropy_with_logits(x[0], x[1]); });
  check_parity(kFamily, "bce_pos_weight", [](auto& x) {
    return binary_cross_entropy_with_logits(x[0], x[1], Reduction::Mean, x[2]);
  });
  check_parity(kFamily, "bce_none", [](auto& x) {
    return binary_cross_entropy_with_logits(x[0], x[1], Reduction::None);
  });
}

TEST_CASE("parity: layer_norm and linear", "[ops][parity]") {
  check_parity(kFamily, "ln_last", [](auto& x) { return layer_norm(x[0], {4}, x[1], x[2]); });
  check_parity(kFamily, "ln_two_dims", [](auto& x) {
    return layer_norm(x[0], {3, 4}, x[1], x[2], 1e-3);
  });
  check_parity(kFamily, "ln_plain", [](auto& x) { return layer_norm(x[0], {5}); });
  check_parity(kFamily, "ln_t", [](auto& x) { return layer_norm(x[0].t(), {4}, x[1], x[2]); });
  check_parity(kFamily, "linear_3d", [](auto& x) { return linear(x[0], x[1], x[2]); });
  check_parity(kFamily, "linear_1d", [](auto& x) { return linear(x[0], x[1], x[2]); });
  check_parity(kFamily, "linear_nobias_t", [](auto& x) { return linear(x[0].t(), x[1]); });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
