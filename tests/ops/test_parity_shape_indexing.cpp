// Forward and backward of the shape, indexing, embedding and patch ops against PyTorch (fixtures
// from tests/fixtures/gen_shape_indexing.py). Each case applies the same op as the script.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
const char* kFamily = "shape_indexing";
}  // namespace

TEST_CASE("parity: shape ops", "[ops][parity]") {
  check_parity(kFamily, "cat_dim0", [](auto& x) { return cat({x[0], x[1]}, 0); });
  check_parity(kFamily, "cat_three_last", [](auto& x) {
    return cat({x[0], x[1], x[2], x[0]}, -1);
  });
  check_parity(kFamily, "cat_transposed", [](auto& x) { return cat({x[0].t(), x[1]}, 1); });
  check_parity(kFamily, "stack_dim1", [](auto& x) { return stack({x[0], x[1], x[0]}, 1); });
  check_parity(kFamily, "split_size", [](auto& x) {
    auto p = split(x[0], 2, 1);
    return cat({p[2], p[0]}, 1);
  });
  check_parity(kFamily, "split_sizes", [](auto& x) {
    auto p = split(x[0], std::vector<int64_t>{1, 0, 1, 2}, 0);
    return mul(p[2], p[0]);
  });
  check_parity(kFamily, "chunk", [](auto& x) { return chunk(x[0], 3, -1)[1]; });
  check_parity(kFamily, "repeat", [](auto& x) { return repeat(x[0], {2, 1, 2}); });
  check_parity(kFamily, "repeat_interleave_int",
               [](auto& x) { return repeat_interleave(x[0], 2, 1); });
  check_parity(kFamily, "repeat_interleave_flat",
               [](auto& x) { return repeat_interleave(x[0], 3); });
  check_parity(kFamily, "repeat_interleave_tensor",
               [](auto& x) { return repeat_interleave(x[0], x[1], 0); });
  check_parity(kFamily, "pad", [](auto& x) { return pad(x[0], {1, 2, -1, 1}, 0.5); });
  check_parity(kFamily, "pad_crop", [](auto& x) { return pad(x[0], {-2, 1}); });
  check_parity(kFamily, "tril", [](auto& x) { return tril(x[0], -1); });
  check_parity(kFamily, "triu", [](auto& x) { return triu(x[0], 1); });
  check_parity(kFamily, "triu_wide", [](auto& x) { return triu(x[0].t(), 2); });
}

TEST_CASE("parity: indexing ops", "[ops][parity]") {
  check_parity(kFamily, "index_select_dup", [](auto& x) { return index_select(x[0], 0, x[1]); });
  check_parity(kFamily, "index_select_mid", [](auto& x) { return index_select(x[0], 1, x[1]); });
  check_parity(kFamily, "index_add", [](auto& x) { return index_add(x[0], 0, x[1], x[2]); });
  check_parity(kFamily, "gather_dim1", [](auto& x) { return gather(x[0], 1, x[1]); });
  check_parity(kFamily, "gather_dim0", [](auto& x) { return gather(x[0], 0, x[1]); });
  check_parity(kFamily, "scatter_add", [](auto& x) { return scatter_add(x[0], 0, x[1], x[2]); });
  check_parity(kFamily, "scatter_add_dim1",
               [](auto& x) { return scatter_add(x[0], 1, x[1], x[2]); });
  check_parity(kFamily, "one_hot", [](auto& x) { return one_hot(x[0], 5); });
}

TEST_CASE("parity: embedding", "[ops][parity]") {
  check_parity(kFamily, "embedding", [](auto& x) { return embedding(x[0], x[1]); });
  check_parity(kFamily, "embedding_pad", [](auto& x) { return embedding(x[0], x[1], 2); });
  check_parity(kFamily, "embedding_pad_neg", [](auto& x) { return embedding(x[0], x[1], -6); });
  // The composite twin matches PyTorch too.
  check_parity(kFamily, "embedding_pad",
               [](auto& x) { return embedding_composite(x[0], x[1], 2); });
}

TEST_CASE("parity: patches and conv2d", "[ops][parity]") {
  check_parity(kFamily, "patchify", [](auto& x) { return patchify(x[0], 2); });
  check_parity(kFamily, "unpatchify", [](auto& x) { return unpatchify(x[0], 2, 4, 6); });
  check_parity(kFamily, "unfold", [](auto& x) { return unfold(x[0], {2, 3}, {2, 1}, {1, 0}); });
  check_parity(kFamily, "fold", [](auto& x) { return fold(x[0], {5, 4}, {2, 3}, {2, 1}, {1, 0}); });
  check_parity(kFamily, "conv2d", [](auto& x) { return conv2d(x[0], x[1], x[2], 2, 1); });
  check_parity(kFamily, "conv2d_nobias", [](auto& x) {
    return conv2d(x[0], x[1], Tensor(), {1, 2}, {0, 1});
  });
  // A stride-p convolution is a linear layer over patchify's patches (how ViT embeds patches).
  check_parity(kFamily, "conv2d_patch", [](auto& x) {
    return add(matmul(patchify(x[0], 2), x[1].reshape({5, -1}).t()), x[2]);
  });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
