// embedding (fused, checked against its composite twin), patchify/unpatchify, unfold/fold and
// conv2d: values, gradcheck (+ gradgradcheck where the backward is differentiable), errors.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void check_grads(const Fn& fn, const std::vector<Tensor>& inputs, bool second_order = true) {
  CHECK_GRADCHECK(fn, inputs);
  if (second_order) CHECK_GRADGRADCHECK(fn, inputs);
}

std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

Tensor idx(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }

}  // namespace

TEST_CASE("embedding values and gradients", "[ops]") {
  Tensor w = arange(0.0, 15.0, 1.0, kFloat32).view({5, 3});
  Tensor y = embedding(w, idx({4, 0, 4, 1}, {2, 2}));
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(floats(y) == std::vector<float>{12, 13, 14, 0, 1, 2, 12, 13, 14, 3, 4, 5});
  CHECK(embedding(w, idx({2}, {})).shape() == Shape{3});
  CHECK(embedding(w, idx({}, {0, 4})).shape() == Shape{0, 4, 3});

  // Duplicates add up; the padding row gets no gradient (but is still looked up).
  for (int64_t pad : {2, -3}) {
    Tensor wl = ones({5, 2}).requires_grad_();
    Tensor out = embedding(wl, idx({0, 2, 2, 4, 0, 0}, {2, 3}), pad);
    CHECK(floats(out.select(0, 0).select(0, 1)) == std::vector<float>{1, 1});
    sum(out).backward();
    CHECK(floats(wl.grad()) == std::vector<float>{3, 3, 0, 0, 0, 0, 0, 0, 1, 1});
  }
}

TEST_CASE("embedding passes gradcheck", "[ops]") {
  auto emb = [](Tensor indices, std::optional<int64_t> pad) {
    return [indices, pad](const std::vector<Tensor>& in) { return embedding(in[0], indices, pad); };
  };
  auto comp = [](Tensor indices, std::optional<int64_t> pad) {
    return [indices, pad](const std::vector<Tensor>& in) {
      return embedding_composite(in[0], indices, pad);
    };
  };
  const std::vector<std::pair<Tensor, Tensor>> cases = {
      {idx({3}, {}), leaf({4, 3}, 1)},                                                // 0-d indices
      {idx({0}, {1}), leaf({1, 2}, 2)},                                               // size-1
      {idx({1, 1, 3, 0, 1, 1}, {2, 3}), leaf({4, 3}, 3)},                             // duplicates
      {idx({0, 3, 2, 1}, {2, 1, 2}), leaf({3, 4}, 4).detach().t().requires_grad_()},  // transposed
      {idx({2, 0, 2, 1, 0, 0, 1, 2}, {2, 2, 1, 2}), leaf({3, 2}, 5)},                 // 4-D indices
      {idx({}, {0, 3}), leaf({4, 3}, 6)},                                             // zero-size
  };
  for (auto& [indices, weight] : cases) {
    INFO("indices " << shape_str(indices.shape()) << ", weight " << shape_str(weight.shape()));
    check_grads(emb(indices, std::nullopt), {weight}, false);
    check_grads(comp(indices, std::nullopt), {weight});
  }
}

TEST_CASE("embedding agrees with its composite twin", "[ops]") {
  Generator gen(7);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t V = randint(1, 12, {}, gen).item<int64_t>();
    const int64_t D = trial == 7 ? 600 : randint(1, 9, {}, gen).item<int64_t>();  // 600: 3 blocks
    Shape ishape;
    const int64_t rank = randint(0, 4, {}, gen).item<int64_t>();
    for (int64_t r = 0; r < rank; ++r) ishape.push_back(randint(0, 5, {}, gen).item<int64_t>());
    Tensor indices = randint(0, V, ishape, gen);
    std::optional<int64_t> pad;
    if (trial % 2) pad = randint(-V, V, {}, gen).item<int64_t>();
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("trial " << trial << ": V " << V << ", D " << D << ", indices " << shape_str(ishape)
                    << ", padding " << (pad ? std::to_string(*pad) : "none") << ", "
                    << dtype_name(dt));
      Tensor w = randn({V, D}, gen, dt).requires_grad_();
      Tensor fused = embedding(w, indices, pad), twin = embedding_composite(w, indices, pad);
      CHECK_CLOSE(fused, twin, 1e-6, 0);
      Tensor gout = randn(fused.shape(), gen, dt);
      Tensor g1 = autograd::grad({fused}, {w}, {gout})[0];
      Tensor g2 = autograd::grad({twin}, {w}, {gout})[0];
      CHECK_CLOSE(g1, g2, 1e-5, 0);
    }
  }
}

TEST_CASE("embedding refuses create_graph and bad arguments", "[ops]") {
  Tensor w = leaf({4, 2}, 1);
  Tensor y = embedding(w, idx({1, 2}, {2}));
  CHECK_THROWS_AS(autograd::grad({y}, {w}, {ones_like(y)}, false, true), AutogradError);

  CHECK_THROWS_AS(embedding(w, idx({1, 4}, {2})), IndexError);
  CHECK_THROWS_WITH(embedding(w, idx({1, 4}, {2})),
                    Contains("embedding") && Contains("index 4") && Contains("size 4"));
  CHECK_THROWS_WITH(embedding(w, idx({-1}, {1})), Contains("index -1"));
  CHECK_THROWS_WITH(embedding(w, idx({0}, {1}), 4),
                    Contains("padding_idx 4") && Contains("(4, 2)"));
  CHECK_THROWS_AS(embedding(w, idx({0}, {1}), -5), IndexError);
  CHECK_THROWS_WITH(embedding(zeros({4}), idx({0}, {1})),
                    Contains("embedding") && Contains("(4,)"));
  CHECK_THROWS_AS(embedding(w, zeros({2})), DTypeError);
  CHECK_THROWS_AS(embedding(zeros({4, 2}, kInt64), idx({0}, {1})), DTypeError);
  CHECK_THROWS_AS(embedding_composite(w, idx({9}, {1})), IndexError);
}

TEST_CASE("patchify matches the layout a stride-p convolution sees", "[ops]") {
  const int64_t B = 2, C = 3, H = 4, W = 6, p = 2, GW = W / p;
  Tensor x = arange(0.0, double(B * C * H * W), 1.0, kFloat64).view({B, C, H, W});
  Tensor y = patchify(x, p);
  REQUIRE(y.shape() == Shape{B, (H / p) * GW, C * p * p});
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  int mismatches = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t gh = 0; gh < H / p; ++gh)
      for (int64_t gw = 0; gw < GW; ++gw)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < p; ++i)
            for (int64_t j = 0; j < p; ++j) {
              int64_t yi = (b * (H / p) * GW + gh * GW + gw) * C * p * p + (c * p + i) * p + j;
              int64_t xi = ((b * C + c) * H + gh * p + i) * W + gw * p + j;
              mismatches += yv[static_cast<size_t>(yi)] != xv[static_cast<size_t>(xi)];
            }
  CHECK(mismatches == 0);
  CHECK(unpatchify(y, p, H, W).to_vector<double>() == xv);

  // linear(patchify(x), W.reshape(D, C*p*p)) == conv(x).flatten(2).transpose(1, 2)
  const int64_t D = 5;
  Tensor weight = leaf({D, C, p, p}, 2), bias = leaf({D}, 3), img = leaf({B, C, H, W}, 4);
  Tensor via_patches = add(matmul(patchify(img, p), weight.reshape({D, -1}).t()), bias);
  Tensor via_conv = conv2d(img, weight, bias, p).flatten(2).transpose(1, 2);
  CHECK_CLOSE(via_patches, via_conv, 1e-12, 1e-12);
}

TEST_CASE("patchify and unpatchify pass gradcheck", "[ops]") {
  auto pf = [](int64_t p) {
    return [p](const std::vector<Tensor>& in) { return patchify(in[0], p); };
  };
  check_grads(pf(2), {leaf({1, 1, 2, 2}, 1)});
  check_grads(pf(1), {leaf({1, 2, 1, 3}, 2)});
  check_grads(pf(2), {leaf({2, 3, 4, 6}, 3)});
  check_grads(pf(2), {leaf({2, 2, 4, 2}, 4).detach().transpose(2, 3).requires_grad_()});
  check_grads(pf(3), {leaf({0, 2, 3, 3}, 5)});
  check_grads(pf(2), {leaf({1, 2, 0, 4}, 6)});
  check_grads([](auto& in) { return unpatchify(in[0], 2, 4, 2); }, {leaf({2, 2, 12}, 7)});
}

TEST_CASE("unfold and fold", "[ops]") {
  Tensor x = add(arange(0.0, 9.0, 1.0, kFloat32).view({1, 1, 3, 3}), 1.0);  // 1..9
  Tensor cols = unfold(x, {2, 2});
  REQUIRE(cols.shape() == Shape{1, 4, 4});
  // Row (i, j) of the kernel, column = output position.
  CHECK(floats(cols) == std::vector<float>{1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});
  Tensor padded = unfold(x, {3, 3}, {2, 2}, {1, 1});  // 2 x 2 windows over the padded image
  REQUIRE(padded.shape() == Shape{1, 9, 4});
  CHECK(floats(padded.select(1, 0)) == std::vector<float>{0, 0, 0, 5});
  CHECK(floats(padded.select(1, 4)) == std::vector<float>{1, 3, 7, 9});
  // fold sums overlaps: each pixel counts the windows that cover it.
  CHECK(floats(fold(ones({1, 4, 4}), {3, 3}, {2, 2})) ==
        std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1});

  // fold is unfold's adjoint: <unfold(a), c> == <a, fold(c)>.
  Tensor a = leaf({2, 3, 5, 4}, 1), c = leaf({2, 3 * 2 * 3, 3 * 2}, 2);  // OH 3, OW 2
  const std::array<int64_t, 2> k = {2, 3}, s = {2, 1}, pd = {1, 0};
  CHECK(unfold(a, k, s, pd).shape() == c.shape());
  double lhs = sum(mul(unfold(a, k, s, pd), c)).item();
  double rhs = sum(mul(a, fold(c, {5, 4}, k, s, pd))).item();
  CHECK(std::abs(lhs - rhs) < 1e-10);

  auto uf = [](std::array<int64_t, 2> kern, std::array<int64_t, 2> st, std::array<int64_t, 2> pad) {
    return [=](const std::vector<Tensor>& in) { return unfold(in[0], kern, st, pad); };
  };
  check_grads(uf({1, 1}, {1, 1}, {0, 0}), {leaf({1, 1, 1, 1}, 3)});
  check_grads(uf({2, 2}, {1, 1}, {1, 1}), {leaf({1, 2, 3, 3}, 4)});
  check_grads(uf({3, 2}, {2, 1}, {1, 0}),
              {leaf({2, 1, 5, 4}, 5).detach().transpose(2, 3).requires_grad_()});
  check_grads(uf({2, 2}, {2, 2}, {0, 0}), {leaf({0, 2, 4, 4}, 6)});
  check_grads(
      [](auto& in) {
        return fold(in[0], {4, 3}, {2, 2}, {1, 2}, {1, 0});
      },
      {leaf({2, 8, 5 * 1}, 7)});  // C 2, OH 5, OW 1
}

TEST_CASE("conv2d values and gradcheck", "[ops]") {
  // A 2x2 sum filter with bias 1 over a 1..9 image.
  Tensor x = add(arange(0.0, 9.0, 1.0, kFloat32).view({1, 1, 3, 3}), 1.0);
  Tensor y = conv2d(x, ones({1, 1, 2, 2}), ones({1}));
  CHECK(y.shape() == Shape{1, 1, 2, 2});
  CHECK(floats(y) == std::vector<float>{13, 17, 25, 29});
  CHECK(conv2d(x, ones({4, 1, 3, 3}), Tensor(), 2, 1).shape() == Shape{1, 4, 2, 2});

  auto conv = [](std::array<int64_t, 2> s, std::array<int64_t, 2> p, bool with_bias) {
    return [=](const std::vector<Tensor>& in) {
      return conv2d(in[0], in[1], with_bias ? in[2] : Tensor(), s, p);
    };
  };
  check_grads(conv({1, 1}, {0, 0}, true),
              {leaf({1, 1, 3, 3}, 1), leaf({1, 1, 2, 2}, 2), leaf({1}, 3)});
  check_grads(conv({2, 1}, {1, 1}, true),
              {leaf({2, 2, 4, 3}, 4), leaf({3, 2, 2, 3}, 5), leaf({3}, 6)});
  check_grads(
      conv({1, 1}, {0, 0}, false),
      {leaf({1, 2, 3, 4}, 7).detach().transpose(2, 3).requires_grad_(), leaf({2, 2, 1, 1}, 8)});
  check_grads(conv({2, 2}, {0, 0}, true),
              {leaf({0, 1, 4, 4}, 9), leaf({2, 1, 2, 2}, 10), leaf({2}, 11)});
  check_grads(conv({3, 3}, {1, 1}, false), {leaf({1, 1, 3, 3}, 12), leaf({1, 1, 3, 3}, 13)});
}

TEST_CASE("patch and conv errors name the op and the shapes", "[ops]") {
  CHECK_THROWS_AS(patchify(zeros({1, 3, 5, 4}), 2), ShapeError);
  CHECK_THROWS_WITH(patchify(zeros({1, 3, 5, 4}), 2),
                    Contains("patchify") && Contains("(1, 3, 5, 4)") && Contains("2"));
  CHECK_THROWS_WITH(patchify(zeros({3, 4, 4}), 2), Contains("patchify") && Contains("(3, 4, 4)"));
  CHECK_THROWS_AS(patchify(zeros({1, 1, 4, 4}), 0), ShapeError);
  CHECK_THROWS_WITH(unpatchify(zeros({1, 3, 4}), 2, 4, 4),
                    Contains("unpatchify") && Contains("(1, 3, 4)"));

  CHECK_THROWS_WITH(unfold(zeros({1, 1, 2, 2}), {3, 3}), Contains("unfold") && Contains("(3, 3)"));
  CHECK_THROWS_AS(unfold(zeros({1, 1, 4, 4}), {2, 2}, {0, 1}), ValueError);
  CHECK_THROWS_AS(unfold(zeros({1, 4, 4}), {2, 2}), ShapeError);
  CHECK_THROWS_AS(unfold(zeros({1, 1, 4, 4}, kInt64), {2, 2}), DTypeError);
  CHECK_THROWS_WITH(fold(zeros({1, 4, 5}), {3, 3}, {2, 2}),
                    Contains("fold") && Contains("(1, 4, 5)") && Contains("4"));
  CHECK_THROWS_WITH(fold(zeros({1, 3, 4}), {3, 3}, {2, 2}),
                    Contains("fold") && Contains("(1, 3, 4)"));

  Tensor x = zeros({1, 3, 4, 4});
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 2, 3, 3}), Tensor()),
                    Contains("conv2d") && Contains("(1, 3, 4, 4)") && Contains("(2, 2, 3, 3)"));
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 3, 3}), zeros({3})),
                    Contains("conv2d") && Contains("(3,)"));
  CHECK_THROWS_AS(conv2d(x, zeros({2, 3, 3, 3}, kFloat64), Tensor()), DTypeError);
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 5, 5}), Tensor()),
                    Contains("conv2d") && Contains("(5, 5)"));
}

TEST_CASE("unfold and fold on inputs large enough to run in parallel", "[ops]") {
  // The whole batch runs on several threads; one image alone stays on one thread.
  Tensor x = test::leaf({2, 3, 32, 32}, 1).detach();
  Tensor cols = unfold(x, {3, 3}, {1, 1}, {1, 1});
  Tensor folded = fold(cols, {32, 32}, {3, 3}, {1, 1}, {1, 1});
  for (int64_t b = 0; b < 2; ++b) {
    Tensor one = x.narrow(0, b, 1);
    Tensor one_cols = unfold(one, {3, 3}, {1, 1}, {1, 1});
    CHECK(cols.narrow(0, b, 1).contiguous().to_vector<double>() == one_cols.to_vector<double>());
    CHECK(folded.narrow(0, b, 1).contiguous().to_vector<double>() ==
          fold(one_cols, {32, 32}, {3, 3}, {1, 1}, {1, 1}).to_vector<double>());
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
