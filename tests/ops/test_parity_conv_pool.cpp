// Forward and backward of the convolution and pooling ops against PyTorch (fixtures from
// tests/fixtures/gen_conv_pool.py), float64 and float32. Each case applies the same op as the
// script; the fused conv2d and its composite twin are both checked.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
const char* kFamily = "conv_pool";
}  // namespace

TEST_CASE("parity: conv2d", "[ops][parity]") {
  for (bool composite : {false, true}) {
    INFO((composite ? "conv2d_composite" : "conv2d"));
    const auto conv = composite ? conv2d_composite : conv2d;
    check_parity(kFamily, "conv2d", [&](auto& x) { return conv(x[0], x[1], x[2], 1, 1, 1, 1); });
    check_parity(kFamily, "conv2d_stride_pad", [&](auto& x) {
      return conv(x[0], x[1], Tensor(), {2, 1}, {1, 2}, 1, 1);
    });
    check_parity(kFamily, "conv2d_dilation", [&](auto& x) {
      return conv(x[0], x[1], x[2], 1, 1, {2, 3}, 1);
    });
    check_parity(kFamily, "conv2d_groups",
                 [&](auto& x) { return conv(x[0], x[1], x[2], 2, 0, 1, 2); });
    check_parity(kFamily, "conv2d_depthwise_same",
                 [&](auto& x) { return conv(x[0], x[1], x[2], 1, "same", 1, 3); });
    check_parity(kFamily, "conv2d_same_even", [&](auto& x) {
      return conv(x[0], x[1], Tensor(), 1, "same", {1, 2}, 1);
    });
    check_parity(kFamily, "conv2d_valid",
                 [&](auto& x) { return conv(x[0], x[1], x[2], 1, "valid", 1, 1); });
    check_parity(kFamily, "conv2d_1x1",
                 [&](auto& x) { return conv(x[0], x[1], x[2], 1, 0, 1, 1); });
    check_parity(kFamily, "conv2d_unbatched", [&](auto& x) {
      return conv(x[0], x[1], Tensor(), 1, {0, 1}, 1, 1);
    });
    check_parity(kFamily, "conv2d_transposed_input",
                 [&](auto& x) { return conv(x[0].transpose(2, 3), x[1], x[2], 2, 1, 1, 1); });
  }
}

TEST_CASE("parity: conv1d", "[ops][parity]") {
  check_parity(kFamily, "conv1d", [](auto& x) { return conv1d(x[0], x[1], x[2], 2, 1); });
  check_parity(kFamily, "conv1d_same_dilated_groups",
               [](auto& x) { return conv1d(x[0], x[1], Tensor(), 1, "same", 2, 2); });
  check_parity(kFamily, "conv1d_unbatched", [](auto& x) { return conv1d(x[0], x[1], x[2]); });
}

TEST_CASE("parity: max pooling", "[ops][parity]") {
  check_parity(kFamily, "max_pool2d", [](auto& x) { return max_pool2d(x[0], 2); });
  check_parity(kFamily, "max_pool2d_pad_stride", [](auto& x) { return max_pool2d(x[0], 3, 2, 1); });
  check_parity(kFamily, "max_pool2d_dilation_ceil", [](auto& x) {
    return max_pool2d(x[0], {2, 3}, {2, 1}, 1, {2, 1}, true);
  });
  check_parity(kFamily, "max_pool2d_ceil",
               [](auto& x) { return max_pool2d(x[0], 2, {}, 0, 1, true); });
  check_parity(kFamily, "max_pool2d_unbatched", [](auto& x) {
    return max_pool2d(x[0], {3, 2}, 1);
  });
  check_parity(kFamily, "max_pool2d_indices",
               [](auto& x) { return max_pool2d_with_indices(x[0], 3, 2, 1).indices.to(kFloat64); });
  check_parity(kFamily, "max_pool2d_nan", [](auto& x) { return max_pool2d(x[0], 2); });
  check_parity(kFamily, "max_pool1d", [](auto& x) { return max_pool1d(x[0], 3, 2, 1, 2, true); });
  check_parity(kFamily, "max_pool1d_indices",
               [](auto& x) { return max_pool1d_with_indices(x[0], 2).indices.to(kFloat64); });
}

TEST_CASE("parity: average pooling", "[ops][parity]") {
  check_parity(kFamily, "avg_pool2d", [](auto& x) { return avg_pool2d(x[0], 2); });
  check_parity(kFamily, "avg_pool2d_pad", [](auto& x) { return avg_pool2d(x[0], 3, 2, 1); });
  check_parity(kFamily, "avg_pool2d_pad_exclude",
               [](auto& x) { return avg_pool2d(x[0], 3, 2, 1, false, false); });
  check_parity(kFamily, "avg_pool2d_ceil", [](auto& x) {
    return avg_pool2d(x[0], {3, 2}, 2, 1, true);
  });
  check_parity(kFamily, "avg_pool2d_ceil_exclude", [](auto& x) {
    return avg_pool2d(x[0], {3, 2}, 2, 1, true, false);
  });
  check_parity(kFamily, "avg_pool1d", [](auto& x) { return avg_pool1d(x[0], 3, 2, 1, true); });
  check_parity(kFamily, "adaptive_avg_pool2d", [](auto& x) {
    return adaptive_avg_pool2d(x[0], {3, 4});
  });
  check_parity(kFamily, "adaptive_avg_pool2d_global",
               [](auto& x) { return adaptive_avg_pool2d(x[0], 1); });
  check_parity(kFamily, "adaptive_avg_pool2d_upsample", [](auto& x) {
    return adaptive_avg_pool2d(x[0], {5, 4});
  });
  check_parity(kFamily, "adaptive_avg_pool1d",
               [](auto& x) { return adaptive_avg_pool1d(x[0], 4); });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
