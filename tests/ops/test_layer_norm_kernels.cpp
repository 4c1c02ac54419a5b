// layer_norm's tuned kernels (ops/kernels/layer_norm.h) against the reference kernels in
// ops/layer_norm.cpp, forward and backward, float32 and float64, contiguous and not, with and
// without weight and bias, on shapes with zero-size and size-1 dims and with one or two
// normalised dims. Bounds: the reference works in double throughout. float64's tuned kernels
// differ only in the order of their sums (SIMD lanes), float32's also round in float (sums in
// float lanes, x - mean as a float pair), so outputs are within a few units of T's machine
// epsilon of the reference, relative to the output's scale (|y| ~ 1; grad_x relative to the
// scale of its terms, rstd |grad weight|, since it can cancel). The weight and bias gradients are
// column sums in double in the same order in both kernels (blocks of rows in row order, then the
// blocks in order): bitwise the same, given the same saved mean and rstd (the backward is
// compared on one recorded graph), and on any thread count.
#include <algorithm>
#include <cmath>

#include "tests/ops/kernel_compare.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::with_kernels;

namespace {

struct LnCase {
  Shape shape, normalized;
};

const std::vector<LnCase> kCases = {
    {{5}, {5}},
    {{1, 1}, {1}},
    {{3, 1}, {1}},
    {{0, 8}, {8}},
    {{2, 0}, {0}},
    {{2, 3, 0}, {3, 0}},
    {{6, 37}, {37}},
    {{2, 3, 4, 5}, {4, 5}},
    {{7, 512}, {512}},
    {{3, 1000}, {1000}},
    {{2, 2, 3, 2}, {3, 2}},
    {{33, 16}, {16}},
    // more rows than one block of the parameter sums (256), and a block size above 256
    {{300, 5}, {5}},
    {{2, 8250, 8}, {8}}};

// The scale of grad_x's terms, rstd |grad weight|, with the largest rstd of any row. grad_x can
// cancel to 0 (a row of one element has grad_x = 0 exactly; a float32 kernel built with FMA
// returns a rounding residual of that scale), so its bound is relative to this.
double grad_x_scale(const Tensor& x, const Shape& ns, const Tensor& g, const Tensor& w) {
  if (x.numel() == 0) return 0.0;
  std::vector<int64_t> dims;
  for (int64_t d = -static_cast<int64_t>(ns.size()); d < 0; ++d) dims.push_back(d);
  Tensor xc = sub(x, mean(x, dims, true));
  const std::vector<double> var = mean(mul(xc, xc), dims).to(kFloat64).to_vector<double>();
  const double min_var = *std::min_element(var.begin(), var.end());
  return test::max_abs(g) * (w.defined() ? test::max_abs(w) : 1.0) / std::sqrt(min_var + 1e-5);
}

void compare(const LnCase& c, DType dt, bool contiguous, bool with_w, bool with_b, double offset,
             uint64_t seed) {
  INFO("shape " << shape_str(c.shape) << " normalized " << shape_str(c.normalized) << " "
                << dtype_name(dt) << (contiguous ? " contiguous" : " non-contiguous")
                << (with_w ? " weight" : "") << (with_b ? " bias" : "") << " mean " << offset);
  Tensor x = add(test::make_input(c.shape, dt, contiguous, seed), offset);
  Tensor w = with_w ? add(test::make_input(c.normalized, dt, true, seed + 1), 1.0) : Tensor();
  Tensor b = with_b ? test::make_input(c.normalized, dt, true, seed + 2) : Tensor();
  Tensor yt = with_kernels(true, [&] { return layer_norm(x, c.normalized, w, b); });
  Tensor yr = with_kernels(false, [&] { return layer_norm(x, c.normalized, w, b); });
  CHECK_EPS_APART(yt, yr, 16.0, test::max_abs(yr));

  std::vector<Tensor> leaves = {x.detach().requires_grad_()};
  if (with_w) leaves.push_back(w.detach().requires_grad_());
  if (with_b) leaves.push_back(b.detach().requires_grad_());
  Tensor y = layer_norm(leaves[0], c.normalized, with_w ? leaves[1] : Tensor(),
                        with_b ? leaves.back() : Tensor());
  Tensor g = test::make_input(c.shape, dt, !contiguous, seed + 3);
  auto gt = with_kernels(true, [&] { return autograd::grad({y}, leaves, {g}, true); });
  auto gr = with_kernels(false, [&] { return autograd::grad({y}, leaves, {g}, true); });
  CHECK_EPS_APART(gt[0], gr[0], 16.0, grad_x_scale(x, c.normalized, g, w));
  for (size_t i = 1; i < leaves.size(); ++i) {
    INFO("parameter gradient " << i);
    CHECK_SAME_BITS(gt[i], gr[i]);
  }
}

}  // namespace

TEST_CASE("layer_norm: tuned kernels agree with the reference kernels", "[ops][kernels]") {
  uint64_t seed = 700;
  for (DType dt : {kFloat32, kFloat64})
    for (bool contiguous : {true, false})
      for (const LnCase& c : kCases)
        for (int params = 0; params < 4; ++params) {
          compare(c, dt, contiguous, params & 1, params & 2, 0.0, seed);
          seed += 4;
        }
}

TEST_CASE("layer_norm backward: the same bits on 1 and 2 threads", "[ops][kernels]") {
  const int prev_threads = num_threads();
  const bool prev_adaptive = adaptive_threads();
  set_adaptive_threads(false);
  for (DType dt : {kFloat32, kFloat64}) {
    Generator gen(901);
    Tensor x = randn({4100, 24}, gen, dt).requires_grad_();
    Tensor w = randn({24}, gen, dt).requires_grad_(), b = randn({24}, gen, dt).requires_grad_();
    Tensor g = randn({4100, 24}, gen, dt);
    std::vector<std::vector<Tensor>> grads;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      grads.push_back(autograd::grad({layer_norm(x, {24}, w, b)}, {x, w, b}, {g}));
    }
    INFO(dtype_name(dt));
    for (size_t i = 0; i < 3; ++i) CHECK_SAME_BITS(grads[0][i], grads[1][i]);
  }
  set_num_threads(prev_threads);
  set_adaptive_threads(prev_adaptive);
}

TEST_CASE("layer_norm kernels agree at mean 1e4 and std 1e-2 (float32's float-pair mean)",
          "[ops][kernels]") {
  uint64_t seed = 800;
  for (DType dt : {kFloat32, kFloat64})
    for (const LnCase& c : {LnCase{{8, 300}, {300}}, LnCase{{4, 3, 17}, {3, 17}}}) {
      Generator gen(seed++);
      compare(c, dt, true, true, true, 0.0, seed++);
      // x = 1e4 + 1e-2 z: the spread is below float32's resolution of the mean's own value.
      Tensor z = mul(randn(c.shape, gen, dt), 1e-2);
      Tensor x = add(z, 1e4);
      Tensor yt = with_kernels(true, [&] { return layer_norm(x, c.normalized); });
      Tensor yr = with_kernels(false, [&] { return layer_norm(x, c.normalized); });
      INFO(dtype_name(dt) << " shape " << shape_str(c.shape));
      // float32: the float pair keeps x - mean exact, so the usual bound holds. float64 sums x
      // itself: both kernels' means are off by about eps |mean| (summed in different orders), which
      // xhat amplifies by |mean| / std = 1e6.
      CHECK_EPS_APART(yt, yr, dt == kFloat32 ? 16.0 : 16.0 * 1e6, test::max_abs(yr));
    }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
