// op_db entries: batch_norm (training on the batch's statistics, eval on running ones),
// group_norm and its composite twin, rms_norm (ops/norms.h): channels-first shapes with spatial
// dims of size 1 and 0, non-contiguous inputs, groups of one channel and of all channels.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

OpFn bn_train(double eps = 1e-5) {
  return [eps](const std::vector<Tensor>& v) {
    return batch_norm(v[0], Tensor(), Tensor(), v.size() > 1 ? v[1] : Tensor(),
                      v.size() > 2 ? v[2] : Tensor(), true, 0.1, eps);
  };
}

std::vector<Sample> batch_norm_samples() {
  OpFn eval = [](const std::vector<Tensor>& v) {
    return batch_norm(v[0], v[1], v[2], v[3], v[4], false, 0.1, 1e-3);
  };
  return {
      sample("(N, C) training", {arg({4, 3}), arg({3}), arg({3})}, bn_train()),
      sample("(N, C, L) training", {arg({2, 3, 4}), arg({3}), arg({3})}, bn_train()),
      sample("(N, C, H, W) training, no affine", {arg({2, 3, 2, 2})}, bn_train()),
      sample("size-1 spatial (3, 2, 1, 1)", {arg({3, 2, 1, 1}), arg({2}), arg({2})}, bn_train()),
      sample("size-0 batch", {arg({0, 3, 2}), arg({3}), arg({3})}, bn_train()),
      sample("transposed (N, C)", {transposed({5, 3}), arg({3}), arg({3})}, bn_train()),
      sample("strided x, eps 0.1", {strided({4, 3}), arg({3}), arg({3})}, bn_train(0.1)),
      sample("eval on running statistics",
             {arg({2, 3, 2}), no_grad(arg({3})), no_grad(arg({3}, kPositive)), arg({3}), arg({3})},
             eval),
      big(sample("big (64, 8, 16)", {arg({64, 8, 16}), arg({8}), arg({8})}, bn_train())),
  };
}

std::vector<ErrorInput> batch_norm_errors() {
  return {
      expect<ShapeError>("running_mean (4) for 3 channels",
                         [] {
                           batch_norm(ones({2, 3}), ones({4}), ones({4}));
                         }),
      expect<ValueError>("eval without running statistics",
                         [] {
                           batch_norm(ones({2, 3}), Tensor(), Tensor());
                         }),
      expect<ValueError>("one value per channel in training",
                         [] {
                           batch_norm(ones({1, 3}), Tensor(), Tensor(), {}, {}, true);
                         }),
      expect<ShapeError>("1-D x", [] { batch_norm(ones({3}), ones({3}), ones({3})); }),
      expect<DTypeError>("float64 weight",
                         [] {
                           batch_norm(ones({2, 3}), ones({3}), ones({3}), ones({3}, kFloat64));
                         }),
  };
}

using GnFn = Tensor (*)(const Tensor&, int64_t, const Tensor&, const Tensor&, double);

std::vector<Sample> group_norm_samples(GnFn f) {
  auto gn = [f](int64_t groups, bool affine = true) {
    return [f, groups, affine](const std::vector<Tensor>& v) {
      return affine ? f(v[0], groups, v[1], v[2], 1e-5) : f(v[0], groups, Tensor(), Tensor(), 1e-5);
    };
  };
  return {
      sample("(2, 4, 3) in 2 groups", {arg({2, 4, 3}), arg({4}), arg({4})}, gn(2)),
      sample("(2, 6, 2, 2) in 3 groups", {arg({2, 6, 2, 2}), arg({6}), arg({6})}, gn(3)),
      sample("one group, no affine", {arg({3, 4, 2})}, gn(1, false)),
      sample("a group per channel", {arg({2, 4, 5}), arg({4}), arg({4})}, gn(4)),
      sample("size-1 spatial (2, 4, 1, 1)", {arg({2, 4, 1, 1}), arg({4}), arg({4})}, gn(2)),
      sample("size-0 batch", {arg({0, 4, 3}), arg({4}), arg({4})}, gn(2)),
      sample("transposed (N, C)", {transposed({3, 4}), arg({4}), arg({4})}, gn(2)),
      big(sample("big (8, 16, 64)", {arg({8, 16, 64}), arg({16}), arg({16})}, gn(4))),
  };
}

std::vector<ErrorInput> group_norm_errors(GnFn f, const char* name) {
  return {
      expect<ValueError>(
          "6 channels in 4 groups",
          [f] {
            f(ones({2, 6, 3}), 4, Tensor(), Tensor(), 1e-5);
          },
          name),
      expect<ShapeError>(
          "weight (4) for 6 channels",
          [f] {
            f(ones({2, 6}), 3, ones({4}), Tensor(), 1e-5);
          },
          name),
      expect<ShapeError>(
          "1-D x", [f] { f(ones({6}), 3, Tensor(), Tensor(), 1e-5); }, name),
  };
}

Tensor group_norm_fn(const Tensor& x, int64_t g, const Tensor& w, const Tensor& b, double eps) {
  return group_norm(x, g, w, b, eps);
}
Tensor group_norm_composite_fn(const Tensor& x, int64_t g, const Tensor& w, const Tensor& b,
                               double eps) {
  return group_norm_composite(x, g, w, b, eps);
}

std::vector<Sample> rms_norm_samples() {
  auto rms = [](Shape s, bool affine) {
    return [s, affine](const std::vector<Tensor>& v) {
      return rms_norm(v[0], s, affine ? v[1] : Tensor(), 1e-5);
    };
  };
  return {
      sample("(3, 4) over (4)", {arg({3, 4}), arg({4})}, rms({4}, true)),
      sample("(2, 3, 4) over (3, 4), no weight", {arg({2, 3, 4})}, rms({3, 4}, false)),
      sample("rows of one element", {arg({3, 1}), arg({1})}, rms({1}, true)),
      sample("size-0 batch", {arg({0, 4}), arg({4})}, rms({4}, true)),
      sample("transposed x", {transposed({3, 4}), arg({4})}, rms({4}, true)),
      big(sample("big rows of 256", {arg({64, 256}), arg({256})}, rms({256}, true))),
  };
}

}  // namespace

std::vector<OpInfo> norm_ops() {
  std::vector<OpInfo> t;
  t.push_back(entry("batch_norm", batch_norm_samples, batch_norm_errors));
  t.push_back(entry(
      "group_norm", [] { return group_norm_samples(group_norm_fn); },
      [] { return group_norm_errors(group_norm_fn, "group_norm"); }));
  t.push_back(entry(
      "group_norm_composite", [] { return group_norm_samples(group_norm_composite_fn); },
      [] { return group_norm_errors(group_norm_composite_fn, "group_norm"); }));
  t.push_back(entry("rms_norm", rms_norm_samples, [] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("normalized (5) for x (2, 4)",
                           [] {
                             rms_norm(ones({2, 4}), {5});
                           }),
        expect<ShapeError>("weight (3) for (4)",
                           [] {
                             rms_norm(ones({2, 4}), {4}, ones({3}));
                           }),
        expect<ValueError>("eps -1",
                           [] {
                             rms_norm(ones({2, 4}), {4}, Tensor(), -1.0);
                           }),
    };
  }));
  return t;
}

}  // namespace nabla::op_db
