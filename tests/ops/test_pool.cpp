// max_pool1d/2d (with indices), avg_pool1d/2d and adaptive_avg_pool1d/2d: values worked by hand,
// gradients scattered through the indices, gradcheck and gradgradcheck in float64, errors.
#include <limits>
#include <numeric>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }
std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

Tensor counting(const Shape& shape) {
  return add(arange(0.0, static_cast<double>(shape_numel(shape)), 1.0, kFloat32).view(shape), 1.0);
}

// A float64 leaf holding a scrambled 0, 0.1, 0.2, ...: distinct values well apart, so each
// window has one maximum and finite differences do not move it.
Tensor distinct_leaf(const Shape& shape, int64_t step) {
  const int64_t n = shape_numel(shape);
  int64_t k = step;
  while (std::gcd(k, std::max<int64_t>(n, 1)) != 1) ++k;  // i -> i*k mod n is a permutation
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.1 * static_cast<double>(i * k % n);
  return from_vector<double>(v, shape).requires_grad_();
}

}  // namespace

TEST_CASE("max_pool values and indices", "[ops]") {
  Tensor x = counting({1, 1, 4, 4});
  MaxPoolResult r = max_pool2d_with_indices(x, 2);
  CHECK(floats(r.output) == std::vector<float>{6, 8, 14, 16});
  CHECK(ints(r.indices) == std::vector<int64_t>{5, 7, 13, 15});
  CHECK(r.indices.shape() == Shape{1, 1, 2, 2});
  // ceil_mode: a last, partial window; padding never wins.
  CHECK(max_pool2d(counting({1, 1, 5, 5}), 2, {}, 0, 1, true).shape() == Shape{1, 1, 3, 3});
  CHECK(floats(max_pool2d(neg(x), 3, 2, 1)) == std::vector<float>{-1, -2, -5, -6});
  // Dilation 2 over 1..16: taps 2 apart.
  CHECK(floats(max_pool2d(x, 2, 1, 0, 2)) == std::vector<float>{11, 12, 15, 16});
  // Ties: the first maximum; a NaN wins.
  Tensor tie = from_vector<float>({3, 3, 1, 2}, {1, 2, 2});
  CHECK(ints(max_pool2d_with_indices(tie, 2).indices) == std::vector<int64_t>{0});
  Tensor with_nan = from_vector<float>({1, std::nanf(""), 5, 2}, {1, 1, 4});
  CHECK(std::isnan(max_pool1d(with_nan, 4).item()));
  CHECK(ints(max_pool1d_with_indices(with_nan, 4).indices) == std::vector<int64_t>{1});
  // 1-D: indices along the length; unbatched input keeps no batch dim.
  MaxPoolResult r1 = max_pool1d_with_indices(from_vector<float>({1, 5, 2, 4, 3, 0}, {1, 6}), 3, 1);
  CHECK(floats(r1.output) == std::vector<float>{5, 5, 4, 4});
  CHECK(ints(r1.indices) == std::vector<int64_t>{1, 1, 3, 3});
  // A window of padding only (kernel 2 with dilation 3 over 2 pixels): -inf, index -1, no grad.
  Tensor two = ones({1, 1, 2}).requires_grad_();
  MaxPoolResult edge = max_pool1d_with_indices(two, 2, 1, 1, 3);
  CHECK(edge.output.item() == -std::numeric_limits<double>::infinity());
  CHECK(ints(edge.indices) == std::vector<int64_t>{-1});
  sum(mul(edge.output, 0.0)).backward();
  CHECK(floats(two.grad()) == std::vector<float>{0, 0});
}

// PyTorch's rule, one output at a time: start at -inf with the first tap's index, a larger value
// or any NaN takes over (so the first of tied maxima, the last NaN).
void naive_max_pool_row(const std::vector<float>& x, int64_t in, int64_t k, int64_t stride,
                        int64_t pad, int64_t dil, int64_t out, std::vector<float>& y,
                        std::vector<int64_t>& idx) {
  for (int64_t o = 0; o < out; ++o) {
    float best = -std::numeric_limits<float>::infinity();
    int64_t arg = -1;
    for (int64_t t = 0; t < k; ++t) {
      const int64_t w = o * stride - pad + t * dil;
      if (w < 0 || w >= in) continue;
      if (arg < 0) arg = w;
      const float v = x[static_cast<size_t>(w)];
      if (v > best || std::isnan(v)) {
        best = v;
        arg = w;
      }
    }
    y.push_back(best);
    idx.push_back(arg);
  }
}

TEST_CASE("max_pool1d: interior and clipped windows follow one rule (ties, NaNs, padding)",
          "[ops]") {
  // Small integers tie often; a few NaNs, sometimes two in a window. The interior windows run
  // side by side with selects, the clipped ones one at a time: both must give these answers.
  const int64_t in = 23;
  std::vector<float> x(static_cast<size_t>(3 * in));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = i % 7 == 3 || i % 11 == 4 ? std::nanf("") : static_cast<float>(i * 5 % 4);
  struct Case {
    int64_t k, stride, pad, dil;
    bool ceil;
  };
  for (const Case c : {Case{2, 2, 0, 1, false}, Case{3, 2, 1, 1, false}, Case{3, 1, 1, 2, true},
                       Case{4, 3, 2, 1, true}, Case{2, 1, 0, 3, false}, Case{5, 5, 2, 1, true}}) {
    CAPTURE(c.k, c.stride, c.pad, c.dil, c.ceil);
    MaxPoolResult r = max_pool1d_with_indices(from_vector<float>(x, {3, in}), c.k, c.stride, c.pad,
                                              c.dil, c.ceil);
    const int64_t out = r.output.size(1);
    std::vector<float> y;
    std::vector<int64_t> idx;
    for (int64_t p = 0; p < 3; ++p)
      naive_max_pool_row(std::vector<float>(x.begin() + p * in, x.begin() + (p + 1) * in), in, c.k,
                         c.stride, c.pad, c.dil, out, y, idx);
    CHECK(ints(r.indices) == idx);
    const std::vector<float> got = floats(r.output);
    REQUIRE(got.size() == y.size());
    for (size_t i = 0; i < y.size(); ++i) {
      CAPTURE(i);
      CHECK((std::isnan(got[i]) ? std::isnan(y[i]) : got[i] == y[i]));
    }
  }
}

TEST_CASE("max_pool's gradient goes to each window's maximum, summed over windows", "[ops]") {
  Tensor x = from_vector<double>({1, 9, 2, 3, 4, 0, 7, 8, 6}, {1, 1, 3, 3}).requires_grad_();
  sum(max_pool2d(x, 2, 1)).backward();  // windows' maxima: 9, 9, 8, 8
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 2, 0, 0, 0, 0, 0, 2, 0});
}

TEST_CASE("avg_pool and adaptive_avg_pool values", "[ops]") {
  Tensor x = counting({1, 1, 4, 4});
  CHECK(floats(avg_pool2d(x, 2)) == std::vector<float>{3.5, 5.5, 11.5, 13.5});
  // Padding counted or not: a 3x3 window at the corner covers 4 ones and 5 padding zeros.
  Tensor o = ones({1, 2, 2});
  CHECK_CLOSE(avg_pool2d(o, 3, 1, 1), full({1, 2, 2}, 4.0 / 9.0), 1e-7, 0);
  CHECK_CLOSE(avg_pool2d(o, 3, 1, 1, false, false), ones({1, 2, 2}), 0, 0);
  // ceil_mode: the last window is clipped to the input (and to the padding for the divisor).
  CHECK(floats(avg_pool1d(counting({1, 5}), 2, {}, 0, true)) == std::vector<float>{1.5, 3.5, 5});
  CHECK(floats(avg_pool1d(counting({1, 5}), 3, 2, 1, true)) ==
        std::vector<float>{1, 3, 3});  // (0+1+2)/3, (2+3+4)/3, (4+5+0)/3
  // Adaptive: windows [floor(o n / m), ceil((o + 1) n / m)).
  CHECK(floats(adaptive_avg_pool1d(counting({1, 1, 10}), 4)) ==
        std::vector<float>{2, 4, 7, 9});  // [0,3) [2,5) [5,8) [7,10)
  CHECK(floats(adaptive_avg_pool2d(x, 1)) == std::vector<float>{8.5});
  CHECK(adaptive_avg_pool2d(x.squeeze(0), {3, 5}).shape() == Shape{1, 3, 5});
  CHECK_CLOSE(adaptive_avg_pool2d(x, 2), avg_pool2d(x, 2), 0, 0);
}

TEST_CASE("pooling passes gradcheck and gradgradcheck", "[ops]") {
  auto mp2 = [](Size2 k, Size2 s, Size2 p, Size2 d, bool ceil) -> Fn {
    return [=](const std::vector<Tensor>& in) { return max_pool2d(in[0], k, s, p, d, ceil); };
  };
  auto ap2 = [](Size2 k, Size2 s, Size2 p, bool ceil, bool count_pad) -> Fn {
    return
        [=](const std::vector<Tensor>& in) { return avg_pool2d(in[0], k, s, p, ceil, count_pad); };
  };
  struct Case {
    const char* name;
    Fn fn;
    Tensor x;
  };
  const std::vector<Case> cases = {
      {"max size-1", mp2(1, {}, 0, 1, false), distinct_leaf({1, 1, 1, 1}, 1)},
      {"max 2x2", mp2(2, {}, 0, 1, false), distinct_leaf({2, 2, 4, 5}, 7)},
      {"max overlapping, padded", mp2(3, 2, 1, 1, false), distinct_leaf({1, 2, 5, 4}, 11)},
      {"max dilated, ceil", mp2({2, 3}, {2, 1}, 1, {2, 1}, true), distinct_leaf({1, 1, 6, 5}, 13)},
      {"max non-contiguous", mp2(2, 1, 0, 1, false),
       distinct_leaf({1, 2, 3, 4}, 17).detach().transpose(2, 3).requires_grad_()},
      {"max empty batch", mp2(2, {}, 0, 1, false), leaf({0, 2, 4, 4}, 6)},
      {"max unbatched 1-D", [](auto& in) { return max_pool1d(in[0], 3, 2, 1, 1, true); },
       distinct_leaf({2, 8}, 5)},
      {"avg size-1", ap2(1, {}, 0, false, true), leaf({1, 1, 1, 1}, 8)},
      {"avg padded", ap2(3, 2, 1, false, true), leaf({2, 1, 5, 4}, 9)},
      {"avg padded, exclude, ceil", ap2({3, 2}, 2, 1, true, false), leaf({1, 2, 6, 5}, 10)},
      {"avg non-contiguous", ap2(2, 1, 0, false, true),
       leaf({1, 2, 3, 4}, 11).detach().transpose(2, 3).requires_grad_()},
      {"avg empty batch", ap2(2, {}, 0, false, true), leaf({0, 1, 4, 4}, 12)},
      {"avg 1-D", [](auto& in) { return avg_pool1d(in[0], 3, 2, 1, true, false); },
       leaf({2, 3, 7}, 13)},
      {"adaptive 2-D",
       [](auto& in) {
         return adaptive_avg_pool2d(in[0], {3, 2});
       },
       leaf({2, 2, 7, 5}, 14)},
      {"adaptive upsampling",
       [](auto& in) {
         return adaptive_avg_pool2d(in[0], {4, 3});
       },
       leaf({1, 1, 3, 2}, 15)},
      {"adaptive 1-D unbatched", [](auto& in) { return adaptive_avg_pool1d(in[0], 3); },
       leaf({2, 5}, 16)},
  };
  for (const Case& c : cases) {
    INFO(c.name << ", x " << shape_str(c.x.shape()));
    const std::vector<Tensor> inputs{c.x};
    CHECK_GRADCHECK(c.fn, inputs);
    CHECK_GRADGRADCHECK(c.fn, inputs);
  }
}

TEST_CASE("pooling errors name the op, the shapes and the arguments", "[ops]") {
  const Tensor x = zeros({1, 2, 4, 4});
  CHECK_THROWS_WITH(max_pool2d(zeros({4, 4}), 2), Contains("max_pool2d") && Contains("(4, 4)"));
  CHECK_THROWS_WITH(avg_pool1d(x, 2), Contains("avg_pool1d") && Contains("(1, 2, 4, 4)"));
  CHECK_THROWS_AS(max_pool2d(zeros({1, 1, 4, 4}, kInt64), 2), DTypeError);
  CHECK_THROWS_AS(adaptive_avg_pool2d(zeros({1, 1, 4, 4}, kBool), 2), DTypeError);
  CHECK_THROWS_WITH(max_pool2d(x, 3, 1, 2),
                    Contains("max_pool2d") && Contains("padding 2") && Contains("kernel_size 3"));
  CHECK_THROWS_AS(avg_pool2d(x, 2, 1, 2), ValueError);
  CHECK_THROWS_AS(max_pool2d(x, 2, 0), ValueError);
  CHECK_THROWS_AS(max_pool2d(x, 0), ValueError);
  CHECK_THROWS_AS(max_pool2d(x, 2, {}, 0, 0), ValueError);
  CHECK_THROWS_WITH(max_pool2d(x, 5),
                    Contains("max_pool2d") && Contains("(1, 2, 4, 4)") && Contains("too small"));
  CHECK_THROWS_WITH(max_pool1d(zeros({1, 3}), 2, 1, 0, 3),
                    Contains("max_pool1d") && Contains("dilation 3") && Contains("length"));
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, {2, -1}),
                    Contains("adaptive_avg_pool2d") && Contains("(2, -1)"));
  CHECK_THROWS_WITH(adaptive_avg_pool1d(zeros({1, 2, 0}), 2),
                    Contains("adaptive_avg_pool1d") && Contains("(1, 2, 0)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
