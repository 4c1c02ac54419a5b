// cross_entropy's tuned kernels (ops/kernels/cross_entropy.h: 16 rows side by side, vectorised
// backward) against the reference kernels in ops/cross_entropy.cpp. Both compute the same exps and
// sum each row in double in class order, so losses, per-position losses and gradients agree
// bitwise, for float32 and float64, index and probability targets, with and without label
// smoothing, per position (Reduction::None) and reduced. Shapes cover C and position counts that
// are not multiples of the 16 lanes and blocks, inner < 16 and inner >= 16 (classes on dim 1),
// size-0 and size-1 dims, and non-contiguous logits. A second test checks layout invariance:
// classes on dim 1 with inner > 1 give bitwise the rows of the same logits laid out as (positions,
// C).
#include "tests/ops/kernel_compare.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::with_kernels;

namespace {

const std::vector<Shape> kShapes = {{1, 5},       {37, 100},  {64, 512},    {17, 16},
                                    {5, 1000, 3}, {4, 7, 33}, {2, 31, 40},  {3, 4, 16},
                                    {2, 3, 5, 7}, {9, 17, 1}, {2, 300, 20}, {10},
                                    {1, 1},       {0, 5},     {3, 5, 0},    {4, 1, 3}};

// Index targets for logits of `shape` with every 7th position ignored (-100).
Tensor index_target(const Shape& shape, uint64_t seed) {
  Shape ts = shape;
  ts.erase(ts.begin() + (shape.size() == 1 ? 0 : 1));
  const int64_t C = shape[shape.size() == 1 ? 0 : 1];
  Generator gen(seed);
  std::vector<int64_t> t = randint(0, C, ts, gen).to_vector<int64_t>();
  for (size_t p = 3; p < t.size(); p += 7) t[p] = -100;
  return from_vector<int64_t>(t, ts);
}

// (N, C, d...) -> (N * d..., C), contiguous: position p's row is row p.
Tensor rows_layout(const Tensor& z) {
  std::vector<int64_t> perm = {0};
  for (int64_t d = 2; d < z.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return z.permute(perm).contiguous().reshape({-1, z.size(1)});
}

// The loss and the gradient for the logits, with the tuned kernels on or off.
std::pair<Tensor, Tensor> loss_and_grad(bool tuned, const Tensor& z, const Tensor& target,
                                        const CrossEntropyOptions& o, const Tensor& g) {
  return with_kernels(tuned, [&] {
    Tensor leaf = z.detach().requires_grad_();
    Tensor y = cross_entropy(leaf, target, o);
    return std::make_pair(y, autograd::grad({y}, {leaf}, {g})[0]);
  });
}

}  // namespace

TEST_CASE("cross_entropy: tuned kernels agree bitwise with the reference kernels",
          "[ops][kernels]") {
  uint64_t seed = 500;
  for (DType dt : {kFloat32, kFloat64})
    for (bool contiguous : {true, false})
      for (const Shape& s : kShapes)
        for (double eps : {0.0, 0.1})
          for (Reduction r : {Reduction::None, Reduction::Mean}) {  // Sum: Mean's path
            INFO("shape " << shape_str(s) << " " << dtype_name(dt) << " eps " << eps
                          << " reduction " << static_cast<int>(r)
                          << (contiguous ? " contiguous" : " non-contiguous"));
            Tensor z = test::make_input(s, dt, contiguous, seed++, 6.0);
            CrossEntropyOptions o;
            o.label_smoothing = eps;
            o.reduction = r;
            Tensor t = index_target(s, seed++);
            Tensor g = r == Reduction::None ? test::make_input(t.shape(), dt, true, seed++)
                                            : scalar_tensor(0.75, dt);
            auto [yt, gt] = loss_and_grad(true, z, t, o, g);
            auto [yr, gr] = loss_and_grad(false, z, t, o, g);
            CHECK_SAME_BITS(yt, yr);
            CHECK_SAME_BITS(gt, gr);
            // Probability targets: the forward is bitwise; the gradient goes through softmax and
            // log_softmax (ops/kernels/softmax.h), within those kernels' bounds.
            if (eps == 0.0) continue;
            Tensor q = softmax(test::make_input(s, dt, true, seed++), s.size() == 1 ? 0 : 1);
            auto [pyt, pgt] = loss_and_grad(true, z, q, o, g);
            auto [pyr, pgr] = loss_and_grad(false, z, q, o, g);
            CHECK_SAME_BITS(pyt, pyr);
            const int64_t C = s[s.size() == 1 ? 0 : 1];
            CHECK_EPS_APART(pgt, pgr, 8.0 + static_cast<double>(C) / 16.0, test::max_abs(pgr));
          }
}

TEST_CASE("cross_entropy: classes on dim 1 with inner > 1 give bitwise the (positions, C) rows",
          "[ops][kernels]") {
  uint64_t seed = 900;
  for (bool tuned : {true, false})
    for (DType dt : {kFloat32, kFloat64})
      for (const Shape& s : kShapes) {
        if (s.size() < 3) continue;
        for (double eps : {0.0, 0.1}) {
          INFO("shape " << shape_str(s) << " " << dtype_name(dt) << " eps " << eps
                        << (tuned ? " tuned" : " reference"));
          Tensor z = test::make_input(s, dt, true, seed++, 6.0);
          Tensor t = index_target(s, seed++);
          Tensor g = test::make_input(t.shape(), dt, true, seed++);
          CrossEntropyOptions o;
          o.reduction = Reduction::None;
          o.label_smoothing = eps;
          auto [y, grad] = loss_and_grad(tuned, z, t, o, g);
          auto [y2, grad2] =
              loss_and_grad(tuned, rows_layout(z), t.reshape({-1}), o, g.reshape({-1}));
          CHECK_SAME_BITS(y.reshape({-1}), y2);
          CHECK_SAME_BITS(rows_layout(grad), grad2);
        }
      }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
