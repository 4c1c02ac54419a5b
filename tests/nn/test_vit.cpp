// ViT: names (Conv2d-shaped patch projection), forward against a hand composition, gradcheck on
// a tiny float64 model, bilinear position-embedding interpolation, attention maps, errors.
#include <map>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

nn::ViTConfig tiny_config() {
  return {.image_size = 4,
          .patch_size = 2,
          .in_channels = 2,
          .num_classes = 3,
          .dim = 4,
          .depth = 2,
          .heads = 2,
          .mlp_dim = 6};
}

void randomize(nn::Module& m, uint64_t seed = 5) {
  m.to(kFloat64);
  Generator g(seed);
  NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.copy_(mul(randn(p.shape(), g, kFloat64), 0.5));
}

}  // namespace

TEST_CASE("ViT: PyTorch-style names and shapes", "[nn]") {
  nn::ViT vit(tiny_config());
  std::vector<std::string> k;
  for (auto& [name, t] : vit.state_dict()) k.push_back(name);
  REQUIRE(k.size() == 2 + 2 + 2 * 12 + 2 + 2);
  CHECK(k[0] == "cls_token");
  CHECK(k[1] == "pos_embed");
  CHECK(k[2] == "patch_embed.proj.weight");
  CHECK(k[3] == "patch_embed.proj.bias");
  CHECK(k[4] == "blocks.0.self_attn.in_proj_weight");
  CHECK(k[28] == "norm.weight");
  CHECK(k[30] == "head.weight");
  CHECK(vit.pos_embed().shape() == Shape{1, 5, 4});
  CHECK(vit.cls_token().shape() == Shape{1, 1, 4});
  auto sd = vit.state_dict();
  CHECK(sd[2].second.shape() == Shape{4, 2, 2, 2});  // like Conv2d(2, 4, kernel 2, stride 2)
  CHECK(max(abs(vit.pos_embed())).item() < 0.2);     // trunc_normal(std 0.02)
  CHECK(vit.block(0)->options().norm_first);
  CHECK(vit.block(0)->options().batch_first);
  CHECK(vit.block(0)->options().activation == nn::FFNActivation::GELU);
  CHECK(vit(randn({3, 2, 4, 4})).shape() == Shape{3, 3});
}

TEST_CASE("ViT: forward equals conv patch embedding + CLS + positions + blocks + head", "[nn]") {
  nn::ViT vit(tiny_config());
  randomize(vit);
  std::map<std::string, Tensor> p;
  for (auto& [name, t] : vit.named_parameters()) p[name] = t;
  Tensor img = test::leaf({2, 2, 4, 4});
  // Patch embedding as the strided convolution it is.
  Tensor conv = conv2d(img, p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], 2);
  Tensor tokens = conv.flatten(2).transpose(1, 2);  // (B, N, dim)
  Tensor x = add(cat({p["cls_token"].expand({2, 1, 4}), tokens}, 1), p["pos_embed"]);
  for (size_t i = 0; i < 2; ++i) x = vit.block(i)->forward(x);
  x = layer_norm(x, {4}, p["norm.weight"], p["norm.bias"]);
  Tensor expected = linear(x.select(1, 0), p["head.weight"], p["head.bias"]);
  CHECK_CLOSE(vit(img), expected, 1e-13, 0);
  CHECK_CLOSE(vit.features(img), x, 1e-13, 0);

  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return vit(in[0]); },
                  [&] {
                    std::vector<Tensor> in{img};
                    for (auto& t : vit.parameters()) in.push_back(t);
                    return in;
                  }());
}

TEST_CASE("bilinear_resize_grid matches F.interpolate(bilinear, align_corners=False)", "[nn]") {
  // F.interpolate(torch.tensor([[1., 2.], [3., 4.]])[None, None], size=(4, 3), mode="bilinear")
  Tensor g = tensor({{1, 2}, {3, 4}}, kFloat64).unsqueeze(-1);
  Tensor expected =
      tensor({{1.0, 1.5, 2.0}, {1.5, 2.0, 2.5}, {2.5, 3.0, 3.5}, {3.0, 3.5, 4.0}}, kFloat64);
  CHECK_CLOSE(nn::bilinear_resize_grid(g, 4, 3).squeeze(-1), expected, 1e-15, 0);
  // Same size: the identity. Downsampling 4 -> 2 averages neighbours.
  Tensor grid = test::leaf({3, 4, 2});
  CHECK_CLOSE(nn::bilinear_resize_grid(grid, 3, 4), grid, 1e-15, 0);
  Tensor line = arange(0.0, 4.0, 1.0, kFloat64).view({1, 4, 1});
  CHECK_CLOSE(nn::bilinear_resize_grid(line, 1, 2).view({2}), tensor({0.5, 2.5}, kFloat64), 1e-15,
              0);
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) { return nn::bilinear_resize_grid(in[0], 5, 3); },
      std::vector<Tensor>{test::leaf({2, 3, 2})});
  CHECK_GRADGRADCHECK(
      [](const std::vector<Tensor>& in) { return nn::bilinear_resize_grid(in[0], 3, 2); },
      std::vector<Tensor>{test::leaf({2, 2, 1})});
  CHECK_THROWS_WITH(nn::bilinear_resize_grid(randn({2, 3}), 4, 4),
                    Contains("bilinear_resize_grid") && Contains("(2, 3)"));
}

TEST_CASE("ViT: interpolate_pos_embed keeps the CLS row and resizes the grid", "[nn]") {
  nn::ViT vit(tiny_config());
  randomize(vit);
  Tensor handle = vit.pos_embed();
  Tensor before = handle.detach().clone();
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return nn::interpolate_pos_embed(in[0], {2, 2}, {3, 4});
      },
      std::vector<Tensor>{test::leaf({1, 5, 4})});

  vit.interpolate_pos_embed({3, 4});
  CHECK(vit.grid() == std::array<int64_t, 2>{3, 4});
  CHECK(handle.shape() == Shape{1, 13, 4});  // the same handle sees the new table
  CHECK(vit.state_dict()[1].second.shape() == Shape{1, 13, 4});
  CHECK_CLOSE(handle.select(1, 0), before.select(1, 0), 0, 0);
  CHECK_CLOSE(handle.narrow(1, 1, 12).view({3, 4, 4}),
              nn::bilinear_resize_grid(before.narrow(1, 1, 4).view({2, 2, 4}), 3, 4), 1e-15, 0);
  Tensor img = randn({1, 2, 6, 8}, kFloat64);
  Tensor y = vit(img);
  CHECK(y.shape() == Shape{1, 3});
  sum(y).backward();
  CHECK(handle.grad().shape() == Shape{1, 13, 4});
  CHECK_THROWS_WITH(vit(randn({1, 2, 4, 4}, kFloat64)), Contains("ViT") &&
                                                            Contains("(1, 2, 4, 4)") &&
                                                            Contains("interpolate_pos_embed"));
  CHECK_THROWS_WITH(nn::interpolate_pos_embed(randn({1, 6, 4}), {2, 2}, {3, 3}),
                    Contains("interpolate_pos_embed") && Contains("(1, 6, 4)"));
}

TEST_CASE("ViT: attention maps for visualisation", "[nn]") {
  nn::ViT vit(tiny_config());
  vit.eval();
  CHECK_THROWS_WITH(vit.cls_attention_map(), Contains("set_store_attention"));
  vit.set_store_attention(true);
  vit(randn({2, 2, 4, 4}));
  auto maps = vit.attention_maps();
  REQUIRE(maps.size() == 2);
  CHECK(maps[1].shape() == Shape{2, 2, 5, 5});  // (B, H, N+1, N+1)
  CHECK(!maps[1].requires_grad());
  CHECK_CLOSE(sum(maps[0], {-1}), ones({2, 2, 5}), 1e-5, 0);
  Tensor cls = vit.cls_attention_map();
  CHECK(cls.shape() == Shape{2, 2, 2, 2});
  CHECK_CLOSE(cls.flatten(2), maps[1].select(2, 0).narrow(2, 1, 4), 0, 0);
}

TEST_CASE("ViT: configuration and input errors", "[nn]") {
  auto c = tiny_config();
  c.image_size = 5;
  CHECK_THROWS_WITH(nn::ViT(c), Contains("ViT") && Contains("5"));
  c = tiny_config();
  c.heads = 3;
  CHECK_THROWS_AS(nn::ViT(c), ValueError);
  nn::ViT vit(tiny_config());
  CHECK_THROWS_WITH(vit(randn({1, 3, 4, 4})),
                    Contains("PatchEmbedding") && Contains("(1, 3, 4, 4)"));
  CHECK_THROWS_AS(vit(randn({2, 4, 4})), ShapeError);
  CHECK_THROWS_AS(vit(randn({1, 2, 4, 4}, kFloat64)), DTypeError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
