// conv2d's tuned kernels (ops/kernels/conv.h: per-sample im2col + GEMM, split across threads)
// against the reference kernel in ops/conv.cpp (the sum over taps, in double), forward and
// backward, float32 and float64, on batches (and one image's groups) split across threads and
// single samples whose GEMMs split themselves, 1x1 kernels (no columns), groups, dilation, strides,
// "same", non-contiguous inputs, no batch, no input or output channels. Bound: each result is a sum
// of n products (n = C/G*kh*kw for y, O/G*kh*kw for grad_x, B*OH*OW for grad_w and grad_b) that the
// GEMM adds in T, so it is within gamma_n = n u / (1 - n u) of the exact sum relative to the sum of
// the products' absolute values (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
// section 3.1); the reference adds one rounding of its double sum. The test allows (n + 4) eps
// times that sum of absolute values, which the same convolution of |x|, |w|, |b| and |grad|
// computes.
#include "tests/ops/kernel_compare.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::with_kernels;

namespace {

struct Case {
  const char* name;
  Shape x, w;
  Size2 stride = 1;
  ConvPadding<2> padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool contiguous = true;
};

const std::vector<Case> kCases = {
    {"3x3, batch split across threads", {6, 4, 12, 12}, {6, 4, 3, 3}, 1, 1},
    {"one sample, GEMMs split", {1, 16, 40, 40}, {32, 16, 3, 3}, 1, 1},
    {"1x1: the sample is its column matrix", {8, 16, 12, 12}, {12, 16, 1, 1}},
    {"1x1 strided: columns needed", {2, 3, 5, 5}, {4, 3, 1, 1}, 2},
    {"groups", {8, 4, 12, 12}, {8, 2, 3, 3}, 2, 1, 1, 2},
    {"one image, depthwise: groups split across threads",
     {1, 32, 24, 24},
     {32, 1, 3, 3},
     1,
     1,
     1,
     32},
    {"depthwise, same", {3, 5, 7, 6}, {10, 1, 3, 3}, 1, "same", 1, 5},
    {"same, even kernel, dilated", {2, 3, 6, 7}, {4, 3, 4, 2}, 1, "same", {1, 3}},
    {"stride, padding, dilation", {2, 2, 9, 8}, {3, 2, 3, 2}, {2, 3}, {2, 1}, {2, 2}},
    {"non-contiguous input", {3, 3, 6, 5}, {2, 3, 2, 2}, 1, 1, 1, 1, false},
    {"empty batch", {0, 3, 4, 4}, {2, 3, 3, 3}},
    {"no input channels", {2, 0, 4, 4}, {3, 0, 3, 3}},
    {"no output channels", {2, 3, 4, 4}, {0, 3, 3, 3}, 1, 1},
};

Tensor run(const Case& c, const std::vector<Tensor>& in) {
  return conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups);
}

}  // namespace

TEST_CASE("conv2d: tuned kernels agree with the reference kernel", "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64}) {
    const double eps = dt == kFloat32 ? 0x1p-23 : 0x1p-52;
    for (const Case& c : kCases) {
      INFO(c.name << ", " << dtype_name(dt));
      std::vector<Tensor> in{test::make_input(c.x, dt, c.contiguous, 1),
                             test::make_input(c.w, dt, true, 2),
                             test::make_input({c.w[0]}, dt, true, 3)};
      for (Tensor& t : in) t = t.detach().requires_grad_();
      const test::KernelComparison cmp =
          test::compare_kernels([&](const std::vector<Tensor>& xs) { return run(c, xs); }, in);

      // The same sums over absolute values: the scale of each result's rounding error.
      std::vector<Tensor> abs_in;
      for (const Tensor& t : in) abs_in.push_back(abs(t.detach()).requires_grad_());
      Tensor y_abs = with_kernels(false, [&] { return run(c, abs_in); });
      Tensor g_abs = abs(test::upstream_grad(y_abs.shape(), dt));
      std::vector<Tensor> grads_abs =
          with_kernels(false, [&] { return autograd::grad({y_abs}, abs_in, {g_abs}); });

      const int64_t taps = c.w[1] * c.w[2] * c.w[3];
      const int64_t positions = cmp.tuned.numel() / std::max<int64_t>(c.w[0], 1);  // B*OH*OW
      const std::vector<int64_t> terms = {c.w[0] / c.groups * c.w[2] * c.w[3], positions,
                                          positions};
      auto bound = [&](const Tensor& scale, int64_t n) {
        return add(mul(scale.detach(), static_cast<double>(n + 4) * eps), 1e-300);
      };
      test::check_within(cmp.tuned, cmp.reference, bound(y_abs, taps + 1));
      for (size_t i = 0; i < 3; ++i) {
        INFO("gradient " << i);
        test::check_within(cmp.tuned_grads[i], cmp.reference_grads[i],
                           bound(grads_abs[i], terms[i]));
      }
    }
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
