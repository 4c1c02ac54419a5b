// The softmax family's tuned kernels (ops/kernels/softmax.h) against the reference kernels in
// ops/softmax.cpp, forward and backward, float32 and float64, contiguous and not, on shapes with
// zero-size and size-1 dims and along dims other than the last.
// Bounds, in units of T's machine epsilon: the two kernels compute the same exps (vec_math::exp_t)
// and differ only in the order of their sums (the tuned ones sum across SIMD lanes, float32
// softmax in float lanes) and in multiplying by 1 / sum where the reference divides. So each
// forward output is within a few eps of the reference relative to itself (softmax) or to the
// row's scale (log_softmax), with a term growing like n / 16 for the float lanes; the backward
// results can cancel, so they are bounded relative to the largest gradient element.
#include <functional>

#include "tests/ops/kernel_compare.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::with_kernels;

namespace {

struct DimCase {
  Shape shape;
  int64_t dim;
};

const std::vector<DimCase> kCases = {
    {{}, 0},         {{1}, 0},       {{1, 1}, 1},       {{7, 1}, 1},      {{1, 9}, 0},
    {{0, 3}, 1},     {{3, 0}, 1},    {{3, 0}, 0},       {{5, 37}, 1},     {{5, 37}, 0},
    {{2, 3, 33}, 1}, {{4, 513}, -1}, {{3, 4, 5, 6}, 2}, {{2, 17, 40}, 2}, {{6, 1000}, 1},
    {{2, 70, 3}, 1}, {{64, 16}, 0}};

using SoftmaxFn = Tensor (*)(const Tensor&, int64_t);

// n: the softmax dim's size.
double forward_bound(int64_t n) { return 8.0 + static_cast<double>(n) / 16.0; }

void compare(SoftmaxFn op, const DimCase& c, DType dt, bool contiguous, uint64_t seed) {
  const int64_t nd = static_cast<int64_t>(c.shape.size());
  const int64_t n = nd == 0 ? 1 : c.shape[static_cast<size_t>(c.dim < 0 ? c.dim + nd : c.dim)];
  INFO("shape " << shape_str(c.shape) << " dim " << c.dim << " " << dtype_name(dt)
                << (contiguous ? " contiguous" : " non-contiguous"));
  Tensor x = test::make_input(c.shape, dt, contiguous, seed, 3.0);
  Tensor yt = with_kernels(true, [&] { return op(x, c.dim); });
  Tensor yr = with_kernels(false, [&] { return op(x, c.dim); });
  const bool log = op == static_cast<SoftmaxFn>(log_softmax);
  CHECK_EPS_APART(yt, yr, forward_bound(n), log ? test::max_abs(yr) : 0.0);

  // Backward on one recorded graph, through each kernel.
  Tensor leaf = x.detach().requires_grad_();
  Tensor y = op(leaf, c.dim);
  Tensor g = test::make_input(c.shape, dt, !contiguous, seed + 1);
  auto grad_with = [&](bool tuned) {
    return with_kernels(tuned, [&] { return autograd::grad({y}, {leaf}, {g}, true)[0]; });
  };
  Tensor gt = grad_with(true), gr = grad_with(false);
  CHECK_EPS_APART(gt, gr, forward_bound(n), test::max_abs(gr) + test::max_abs(g));
}

}  // namespace

TEST_CASE("softmax and log_softmax: tuned kernels agree with the reference kernels",
          "[ops][kernels]") {
  uint64_t seed = 100;
  for (SoftmaxFn op : {static_cast<SoftmaxFn>(softmax), static_cast<SoftmaxFn>(log_softmax)})
    for (DType dt : {kFloat32, kFloat64})
      for (bool contiguous : {true, false})
        for (const DimCase& c : kCases) compare(op, c, dt, contiguous, seed++);
}

TEST_CASE("softmax kernels: -inf entries, huge logits and an all -inf row agree",
          "[ops][kernels]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    const double inf = std::numeric_limits<double>::infinity();
    Tensor x = from_vector<double>({-inf, 1.0, 2.0, -inf,  // some positions -inf
                                    1e4, -1e4, 1e4, 0.0,   // huge magnitudes
                                    -inf, -inf, -inf, -inf},
                                   {3, 4})
                   .to(dt);
    for (SoftmaxFn op : {static_cast<SoftmaxFn>(softmax), static_cast<SoftmaxFn>(log_softmax)}) {
      Tensor yt = with_kernels(true, [&] { return op(x, 1); });
      Tensor yr = with_kernels(false, [&] { return op(x, 1); });
      CHECK_EPS_APART(yt, yr, 8.0, 1.0);
      CHECK(std::isnan(yr.select(0, 2).select(0, 0).item<double>()));  // all -inf: NaN
    }
  }
}

TEST_CASE("masked_softmax: tuned kernel agrees with the reference kernel", "[ops][kernels]") {
  const double inf = std::numeric_limits<double>::infinity();
  uint64_t seed = 300;
  for (DType dt : {kFloat32, kFloat64})
    for (bool contiguous : {true, false})
      for (const Shape& s : std::vector<Shape>{{2, 3, 5}, {3, 1, 1}, {2, 4, 0}, {4, 6, 37}}) {
        INFO("shape " << shape_str(s) << " " << dtype_name(dt)
                      << (contiguous ? " contiguous" : " non-contiguous"));
        const int64_t B = s[0], Q = s[1], K = s[2];
        Tensor x = test::make_input(s, dt, contiguous, seed++, 3.0);
        // valid lengths per batch row (one row fully masked) and per query.
        std::vector<int64_t> per_batch, per_query;
        for (int64_t b = 0; b < B; ++b) per_batch.push_back(b == 1 ? 0 : (b * 3 + 1) % (K + 1));
        for (int64_t i = 0; i < B * Q; ++i) per_query.push_back((i * 5 + 2) % (K + 1));
        // an additive mask with -inf entries, and a bool mask broadcast over queries.
        std::vector<double> add_v(static_cast<size_t>(Q * K));
        std::vector<int64_t> keep_v(static_cast<size_t>(B * K));
        for (size_t i = 0; i < add_v.size(); ++i)
          add_v[i] = i % 3 == 0 ? -inf : 0.5 * double(i % 4);
        for (size_t i = 0; i < keep_v.size(); ++i) keep_v[i] = i % 4 != 1;
        Tensor additive = from_vector<double>(add_v, {Q, K}).to(dt);
        Tensor keep = from_vector<int64_t>(keep_v, {B, 1, K}).to(kBool);
        std::vector<std::function<Tensor(const Tensor&)>> variants = {
            [&](const Tensor& v) {
              return masked_softmax(v, from_vector<int64_t>(per_batch, {B}));
            },
            [&](const Tensor& v) {
              return masked_softmax(v, from_vector<int64_t>(per_query, {B, Q}));
            },
            [&](const Tensor& v) { return masked_softmax(v, additive, MaskKind::Additive); },
            [&](const Tensor& v) { return masked_softmax(v, keep, MaskKind::Bool); }};
        for (size_t i = 0; i < variants.size(); ++i) {
          INFO("mask variant " << i);
          Tensor yt = with_kernels(true, [&] { return variants[i](x); });
          Tensor yr = with_kernels(false, [&] { return variants[i](x); });
          CHECK_EPS_APART(yt, yr, 4.0, 0.0);
          Tensor leaf = x.detach().requires_grad_();
          Tensor y = variants[i](leaf);
          Tensor g = test::make_input(s, dt, true, seed++);
          Tensor gt = with_kernels(true, [&] { return autograd::grad({y}, {leaf}, {g}, true)[0]; });
          Tensor gr =
              with_kernels(false, [&] { return autograd::grad({y}, {leaf}, {g}, true)[0]; });
          CHECK_EPS_APART(gt, gr, forward_bound(K), test::max_abs(gr) + test::max_abs(g));
        }
      }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
