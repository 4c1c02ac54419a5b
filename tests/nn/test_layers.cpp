#include "nabla/nn/layers.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

TEST_CASE("LayerNorm, Embedding, Dropout modules use PyTorch names and defaults", "[nn]") {
  nn::LayerNorm ln(4);
  auto names = ln.named_parameters();
  REQUIRE(names.size() == 2);
  CHECK(names[0].first == "weight");
  CHECK(names[1].first == "bias");
  CHECK(ln.weight().to_vector<float>() == std::vector<float>(4, 1.f));
  Tensor x = randn({2, 3, 4});
  CHECK_CLOSE(ln(x), layer_norm(x, {4}, ln.weight(), ln.bias()), 1e-6, 0);

  nn::Embedding emb(10, 3, 0);
  CHECK(emb.weight().select(0, 0).to_vector<float>() == std::vector<float>(3, 0.f));
  Tensor idx = from_vector<int64_t>({0, 5, 5, 9}, {2, 2});
  CHECK(emb(idx).shape() == Shape{2, 2, 3});
  sum(emb(idx)).backward();
  CHECK(emb.weight().grad().select(0, 0).to_vector<float>() == std::vector<float>(3, 0.f));
  CHECK(emb.weight().grad().select(0, 5).to_vector<float>() == std::vector<float>(3, 2.f));
  CHECK_THROWS_WITH(nn::Embedding(4, 2, 7), Contains("padding_idx 7"));

  nn::Dropout drop(0.5);
  Tensor ones_in = ones({1000});
  Tensor train_out = drop(ones_in);
  auto v = train_out.to_vector<float>();
  CHECK(std::count(v.begin(), v.end(), 0.f) > 300);
  drop.eval();
  CHECK(drop(ones_in).same(ones_in));
  CHECK_THROWS_AS(nn::Dropout(1.5), ValueError);

  nn::GELU g;
  CHECK_CLOSE(g(x), gelu(x), 0, 0);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
