// conv1d and conv2d: values worked by hand, the fused op against its composite twin (values and
// gradients over strides, paddings, dilations, groups, layouts and a batch that runs in
// parallel), gradcheck and gradgradcheck in float64, and the errors.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

// 1, 2, ..., n as a float32 tensor of `shape`.
Tensor counting(const Shape& shape) {
  return add(arange(0.0, static_cast<double>(shape_numel(shape)), 1.0, kFloat32).view(shape), 1.0);
}

// One conv2d configuration; fn(in) runs it on in = {x, weight[, bias]}.
struct ConvCase {
  std::string name;
  Shape x, w;
  Size2 stride = 1;
  ConvPadding<2> padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  bool transposed = false;  // x is stored with H and W swapped and read transposed
};

Fn conv_fn(const ConvCase& c, bool composite) {
  return [c, composite](const std::vector<Tensor>& in) {
    const Tensor x = c.transposed ? in[0].transpose(-1, -2) : in[0];
    const Tensor b = c.bias ? in[2] : Tensor();
    return composite ? conv2d_composite(x, in[1], b, c.stride, c.padding, c.dilation, c.groups)
                     : conv2d(x, in[1], b, c.stride, c.padding, c.dilation, c.groups);
  };
}

std::vector<Tensor> conv_inputs(const ConvCase& c, uint64_t seed, DType dt = kFloat64) {
  Shape xs = c.x;
  if (c.transposed) std::swap(xs[xs.size() - 1], xs[xs.size() - 2]);
  std::vector<Tensor> in{leaf(xs, seed).to(dt).detach().requires_grad_(),
                         leaf(c.w, seed + 1).to(dt).detach().requires_grad_()};
  if (c.bias) in.push_back(leaf({c.w[0]}, seed + 2).to(dt).detach().requires_grad_());
  return in;
}

const std::vector<ConvCase> kCases = {
    {"size-1", {1, 1, 1, 1}, {1, 1, 1, 1}},
    {"1x1 (columns are the input)", {2, 3, 2, 3}, {4, 3, 1, 1}},
    {"3x3 padding 1", {2, 2, 4, 3}, {3, 2, 3, 3}, 1, 1},
    {"stride and padding per dim", {2, 2, 5, 4}, {3, 2, 2, 3}, {2, 1}, {1, 0}},
    {"dilation", {1, 2, 6, 5}, {2, 2, 2, 2}, 1, {1, 2}, {2, 3}},
    {"groups", {2, 4, 3, 3}, {6, 2, 2, 2}, 1, 0, 1, 2},
    {"depthwise, same", {1, 3, 4, 4}, {3, 1, 3, 3}, 1, "same", 1, 3},
    {"same, even kernel", {1, 2, 3, 4}, {2, 2, 2, 4}, 1, "same", {2, 1}, 1, false},
    {"valid, no bias", {2, 1, 3, 3}, {2, 1, 2, 2}, 1, "valid", 1, 1, false},
    {"stride past the image", {1, 1, 3, 3}, {1, 1, 3, 3}, 3, 1},
    {"transposed input", {2, 2, 3, 4}, {2, 2, 2, 2}, 1, 1, 1, 1, true, true},
    {"empty batch", {0, 2, 4, 4}, {3, 2, 3, 3}, 2, 1},
    {"unbatched", {2, 4, 3}, {2, 2, 2, 2}, 1, {0, 1}},
};

}  // namespace

TEST_CASE("conv2d values", "[ops]") {
  // A 2x2 sum filter with bias 1 over a 1..9 image.
  Tensor x = counting({1, 1, 3, 3});
  CHECK(floats(conv2d(x, ones({1, 1, 2, 2}), ones({1}))) == std::vector<float>{13, 17, 25, 29});
  // Dilation 2: the four corners of the 3x3 image.
  CHECK(floats(conv2d(x, ones({1, 1, 2, 2}), Tensor(), 1, 0, 2)) == std::vector<float>{20});
  // Groups: each output channel sums the windows of its own input channel (1..9 and 10..18).
  Tensor two = counting({1, 2, 3, 3});
  Tensor y = conv2d(two, ones({2, 1, 3, 3}), Tensor(), 1, 0, 1, 2);
  CHECK(floats(y) == std::vector<float>{45, 126});
  // "same" keeps the size; with an even kernel the extra padding goes after (right/bottom).
  Tensor w = counting({1, 1, 2, 2});
  Tensor same = conv2d(x, w, Tensor(), 1, "same");
  REQUIRE(same.shape() == Shape{1, 1, 3, 3});
  CHECK_CLOSE(same, conv2d(pad(x, {0, 1, 0, 1}), w), 0, 0);
  CHECK(conv2d(counting({1, 1, 5, 6}), ones({1, 1, 4, 3}), Tensor(), 1, "same", {1, 2}).shape() ==
        Shape{1, 1, 5, 6});
  CHECK(conv2d(x, w, Tensor(), 1, "valid").shape() == Shape{1, 1, 2, 2});
  // Without the batch dim, the output has none.
  CHECK_CLOSE(conv2d(two.squeeze(0), ones({3, 2, 2, 2})),
              conv2d(two, ones({3, 2, 2, 2})).squeeze(0), 0, 0);
  CHECK(conv2d(zeros({0, 2, 3, 3}), ones({4, 2, 2, 2}), ones({4})).shape() == Shape{0, 4, 2, 2});
}

TEST_CASE("conv1d is conv2d on a height-1 image", "[ops]") {
  Tensor x = leaf({2, 4, 9}, 1), w = leaf({6, 2, 3}, 2), b = leaf({6}, 3);
  Tensor y = conv1d(x, w, b, 2, 1, 2, 2);
  CHECK(y.shape() == Shape{2, 6, 4});
  CHECK_CLOSE(y, conv2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 2}, {0, 1}, {1, 2}, 2).squeeze(2),
              1e-12, 0);
  CHECK(conv1d(x, w, b, 1, "same", 3, 2).shape() == Shape{2, 6, 9});
  CHECK_CLOSE(conv1d(x.select(0, 1), w, b, 1, 0, 1, 2), conv1d(x, w, b, 1, 0, 1, 2).select(0, 1),
              1e-12, 0);
}

TEST_CASE("conv2d agrees with its composite twin", "[ops]") {
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-11 : 2e-5;
    for (const ConvCase& c : kCases) {
      INFO(c.name << ", " << dtype_name(dt));
      std::vector<Tensor> in = conv_inputs(c, 3, dt);
      Tensor fused = conv_fn(c, false)(in), twin = conv_fn(c, true)(in);
      CHECK_CLOSE(fused, twin, tol, tol);
      Tensor g = test::leaf(fused.shape(), 9).to(dt).detach();
      std::vector<Tensor> g1 = autograd::grad({fused}, in, {g}),
                          g2 = autograd::grad({twin}, in, {g});
      for (size_t i = 0; i < in.size(); ++i) {
        INFO("gradient " << i);
        CHECK_CLOSE(g1[i], g2[i], tol, tol);
      }
    }
  }
}

TEST_CASE("conv1d and conv2d pass gradcheck", "[ops]") {
  for (const ConvCase& c : kCases) {
    INFO(c.name);
    CHECK_GRADCHECK(conv_fn(c, false), conv_inputs(c, 11));
  }
  auto c1 = [](int64_t stride, ConvPadding<1> padding, int64_t dilation, int64_t groups) {
    return [=](const std::vector<Tensor>& in) {
      return conv1d(in[0], in[1], in[2], stride, padding, dilation, groups);
    };
  };
  CHECK_GRADCHECK(c1(2, 1, 1, 1),
                  (std::vector<Tensor>{leaf({2, 3, 7}, 1), leaf({2, 3, 3}, 2), leaf({2}, 3)}));
  CHECK_GRADCHECK(c1(1, "same", 2, 2),
                  (std::vector<Tensor>{leaf({1, 4, 6}, 4), leaf({2, 2, 4}, 5), leaf({2}, 6)}));
  CHECK_GRADCHECK(c1(1, 0, 1, 1),
                  (std::vector<Tensor>{leaf({3, 5}, 7), leaf({1, 3, 2}, 8), leaf({1}, 9)}));
}

TEST_CASE("conv2d's backward under create_graph: gradgradcheck", "[ops]") {
  for (size_t i : {2u, 4u, 5u, 7u, 10u}) {  // padding, dilation, groups, even "same", transposed
    const ConvCase& c = kCases[i];
    INFO(c.name);
    CHECK_GRADGRADCHECK(conv_fn(c, false), conv_inputs(c, 21));
  }
}

TEST_CASE("conv2d on a batch large enough to run in parallel matches one sample at a time",
          "[ops]") {
  // 8 samples of 12 x 12 images: split across the threads (enough work); one sample is not.
  for (const ConvCase& c : {ConvCase{"3x3", {8, 4, 12, 12}, {6, 4, 3, 3}, 1, 1},
                            ConvCase{"1x1", {8, 16, 12, 12}, {12, 16, 1, 1}},
                            ConvCase{"groups", {8, 4, 12, 12}, {8, 2, 3, 3}, 2, 1, 1, 2}}) {
    INFO(c.name);
    std::vector<Tensor> in = conv_inputs(c, 5, kFloat32);
    Tensor y = conv_fn(c, false)(in);
    Tensor g = test::leaf(y.shape(), 6).to(kFloat32).detach();
    std::vector<Tensor> grads = autograd::grad({y}, in, {g});
    Tensor gw_sum = zeros_like(in[1]), gb_sum = zeros_like(in[2]);
    for (int64_t b = 0; b < c.x[0]; ++b) {
      std::vector<Tensor> one{in[0].narrow(0, b, 1).detach().requires_grad_(), in[1], in[2]};
      Tensor yb = conv_fn(c, false)(one);
      CHECK(floats(yb) == floats(y.narrow(0, b, 1)));
      std::vector<Tensor> gb = autograd::grad({yb}, one, {g.narrow(0, b, 1)});
      CHECK(floats(gb[0]) == floats(grads[0].narrow(0, b, 1)));
      gw_sum = add(gw_sum, gb[1]);
      gb_sum = add(gb_sum, gb[2]);
    }
    CHECK_CLOSE(grads[1], gw_sum, 1e-4, 1e-4);  // summed per thread, then across threads
    CHECK_CLOSE(grads[2], gb_sum, 1e-4, 1e-4);
  }
}

TEST_CASE("conv2d in deterministic mode gives the same bits at any thread count", "[ops]") {
  const int prev_threads = num_threads();
  const bool prev_det = deterministic(), prev_adaptive = adaptive_threads();
  set_deterministic(true);
  set_adaptive_threads(false);
  for (const ConvCase& c :
       {ConvCase{"3x3", {8, 4, 12, 12}, {6, 4, 3, 3}, 1, 1},
        ConvCase{"depthwise, one image", {1, 32, 24, 24}, {32, 1, 3, 3}, 1, 1, 1, 32}}) {
    INFO(c.name);
    std::vector<Tensor> in = conv_inputs(c, 7, kFloat32);
    Tensor g = test::leaf({c.x[0], c.w[0], c.x[2], c.x[3]}, 8).to(kFloat32).detach();
    auto run = [&](int threads) {
      set_num_threads(threads);
      Tensor y = conv_fn(c, false)(in);
      std::vector<Tensor> out = autograd::grad({y}, in, {g});
      out.push_back(y.detach());
      return out;
    };
    const std::vector<Tensor> one = run(1);
    for (int threads : {2, 3}) {
      const std::vector<Tensor> other = run(threads);
      for (size_t i = 0; i < one.size(); ++i) {
        INFO(threads << " threads, result " << i);
        CHECK(floats(other[i]) == floats(one[i]));
      }
    }
  }
  set_num_threads(prev_threads);
  set_deterministic(prev_det);
  set_adaptive_threads(prev_adaptive);
}

TEST_CASE("conv errors name the op, the shapes and the arguments", "[ops]") {
  const Tensor x = zeros({1, 3, 4, 4});
  // Channels against groups.
  CHECK_THROWS_AS(conv2d(x, zeros({2, 2, 3, 3})), ShapeError);
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 2, 3, 3})),
                    Contains("conv2d") && Contains("(1, 3, 4, 4)") && Contains("(2, 2, 3, 3)"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 4, 4}), zeros({2, 1, 3, 3}), Tensor(), 1, 0, 1, 2),
                    Contains("groups=2") && Contains("(1, 4, 4, 4)") && Contains("(2, 1, 3, 3)"));
  CHECK_THROWS_WITH(conv2d(zeros({1, 4, 4, 4}), zeros({3, 2, 3, 3}), Tensor(), 1, 0, 1, 2),
                    Contains("groups=2") && Contains("3 output channels"));
  CHECK_THROWS_AS(conv2d(x, zeros({3, 3, 1, 1}), Tensor(), 1, 0, 1, 0), ValueError);
  // Kernel larger than the padded input, also once dilated.
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 5, 5})), Contains("conv2d") && Contains("(5, 5)"));
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 3, 3}), Tensor(), 1, 0, 2),
                    Contains("dilation (2, 2)") && Contains("(5, 5)") && Contains("(4, 4)"));
  CHECK_THROWS_WITH(conv1d(zeros({1, 2, 3}), zeros({1, 2, 5})),
                    Contains("conv1d") && Contains("(5,)") && Contains("(3,)"));
  // Dtypes.
  CHECK_THROWS_AS(conv2d(zeros({1, 3, 4, 4}, kInt64), zeros({2, 3, 3, 3}, kInt64)), DTypeError);
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 3, 3}, kFloat64)),
                    Contains("conv2d") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(conv2d(x, zeros({2, 3, 3, 3}), zeros({2}, kFloat64)), DTypeError);
  // Shapes and arguments.
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 3, 3}), zeros({3})),
                    Contains("conv2d") && Contains("(3,)"));
  CHECK_THROWS_WITH(conv2d(zeros({3, 4}), zeros({2, 3, 3, 3})),
                    Contains("conv2d") && Contains("(3, 4)"));
  CHECK_THROWS_WITH(conv1d(x, zeros({2, 3, 3})), Contains("conv1d") && Contains("(1, 3, 4, 4)"));
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 3, 3}), Tensor(), 2, "same"),
                    Contains("same") && Contains("stride (2, 2)"));
  CHECK_THROWS_WITH(conv2d(x, zeros({2, 3, 3, 3}), Tensor(), 1, "full"),
                    Contains("conv2d") && Contains("\"full\""));
  CHECK_THROWS_AS(conv2d(x, zeros({2, 3, 3, 3}), Tensor(), 0), ValueError);
  CHECK_THROWS_AS(conv2d(x, zeros({2, 3, 3, 3}), Tensor(), 1, -1), ValueError);
  CHECK_THROWS_AS(conv2d(x, zeros({2, 3, 3, 3}), Tensor(), 1, 0, 0), ValueError);
  CHECK_THROWS_WITH(conv2d_composite(x, zeros({2, 2, 3, 3})), Contains("conv2d_composite"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
