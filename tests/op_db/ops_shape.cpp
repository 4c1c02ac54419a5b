// op_db entries: the copying shape ops of ops/shape.h. They take every dtype. split and chunk
// return views; their samples concatenate the flattened pieces, so every piece's values and
// gradients are checked.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

Tensor joined(const std::vector<Tensor>& pieces) {
  std::vector<Tensor> flat;
  for (const Tensor& p : pieces) flat.push_back(p.reshape({-1}));
  return cat(flat, 0);
}

OpFn cat_along(int64_t dim) {
  return [dim](const std::vector<Tensor>& v) { return cat(v, dim); };
}
OpFn stack_along(int64_t dim) {
  return [dim](const std::vector<Tensor>& v) { return stack(v, dim); };
}

// Shape ops move bytes: every dtype.
OpInfo any_dtype_entry(const std::string& name, std::function<std::vector<Sample>()> samples,
                       std::function<std::vector<ErrorInput>()> errors) {
  OpInfo op = entry(name, std::move(samples), std::move(errors));
  op.dtypes = kAllDTypes;
  return op;
}

std::vector<Sample> cat_samples() {
  return {
      sample("two (2, 3) along 0", {arg({2, 3}), arg({2, 3})}, cat_along(0)),
      sample("(2, 1), (2, 3), (2, 2) along 1", {arg({2, 1}), arg({2, 3}), arg({2, 2})},
             cat_along(1)),
      sample("along -1 of 3-D", {arg({2, 3, 1}), arg({2, 3, 2})}, cat_along(-1)),
      sample("one tensor", {arg({2, 3})}, cat_along(0)),
      sample("with a size-0 piece", {arg({0, 3}), arg({2, 3})}, cat_along(0)),
      sample("1-D empty piece is skipped", {arg({0}), arg({2, 3})}, cat_along(0)),
      sample("all size-0", {arg({0, 3}), arg({0, 3})}, cat_along(0)),
      sample("transposed, strided, expanded",
             {transposed({3, 4}), strided({3, 4}), expanded({1, 4}, {3, 4})}, cat_along(0)),
      sample("4-D along 2", {arg({2, 1, 3, 2}), arg({2, 1, 1, 2})}, cat_along(2)),
      big(sample("big along 1", {arg({264, 256}), transposed({264, 256})}, cat_along(1))),
  };
}

std::vector<Sample> stack_samples() {
  return {
      sample("two (2, 3) along 0", {arg({2, 3}), arg({2, 3})}, stack_along(0)),
      sample("three (2, 3) along -1", {arg({2, 3}), arg({2, 3}), arg({2, 3})}, stack_along(-1)),
      sample("0-d tensors", {arg({}), arg({})}, stack_along(0)),
      sample("size-0", {arg({0, 3}), arg({0, 3})}, stack_along(1)),
      sample("transposed and expanded", {transposed({3, 4}), expanded({3, 1}, {3, 4})},
             stack_along(1)),
      big(sample("big along 1", {arg({264, 512}), arg({264, 512})}, stack_along(1))),
  };
}

}  // namespace

std::vector<OpInfo> shape_ops() {
  std::vector<OpInfo> t;
  t.push_back(any_dtype_entry("cat", cat_samples, [] {
    return std::vector<ErrorInput>{
        expect<ValueError>("no tensors", [] { cat({}, 0); }),
        expect<DTypeError>("float32 and float64",
                           [] {
                             cat({ones({2}), ones({2}, kFloat64)});
                           }),
        expect<ShapeError>("(2, 3) and (2, 4) along 0",
                           [] {
                             cat({ones({2, 3}), ones({2, 4})});
                           }),
        expect<ShapeError>("dim 2 of 2-D",
                           [] {
                             cat({ones({2, 3}), ones({2, 3})}, 2);
                           }),
        expect<ShapeError>("0-d tensors",
                           [] {
                             cat({ones({}), ones({})});
                           }),
    };
  }));
  t.push_back(any_dtype_entry("stack", stack_samples, [] {
    return std::vector<ErrorInput>{
        expect<ValueError>("no tensors", [] { stack({}, 0); }),
        expect<ShapeError>("(2, 3) and (3, 2)",
                           [] {
                             stack({ones({2, 3}), ones({3, 2})});
                           }),
        expect<ShapeError>("dim 3 of 2-D",
                           [] {
                             stack({ones({2, 3}), ones({2, 3})}, 3);
                           }),
    };
  }));
  t.push_back(any_dtype_entry(
      "split",
      [] {
        auto by_size = [](int64_t n, int64_t dim) {
          return [n, dim](const std::vector<Tensor>& v) { return joined(split(v[0], n, dim)); };
        };
        auto by_sizes = [](std::vector<int64_t> sizes, int64_t dim) {
          return [sizes, dim](const std::vector<Tensor>& v) {
            return joined(split(v[0], sizes, dim));
          };
        };
        return std::vector<Sample>{
            sample("(5, 2) by 2 along 0 (last piece shorter)", {arg({5, 2})}, by_size(2, 0)),
            sample("(2, 3) by 5 along 1 (one piece)", {arg({2, 3})}, by_size(5, 1)),
            sample("transposed (3, 4) by 1 along -1", {transposed({3, 4})}, by_size(1, -1)),
            sample("size-0 dim", {arg({0, 3})}, by_size(2, 0)),
            sample("expanded (1, 4) -> (3, 4) by 2 along 0", {expanded({1, 4}, {3, 4})},
                   by_size(2, 0)),
            sample("sizes {1, 3, 1} along 0 of (5, 2)", {arg({5, 2})}, by_sizes({1, 3, 1}, 0)),
            sample("sizes {0, 3, 0} along 1 of strided (2, 3)", {strided({2, 3})},
                   by_sizes({0, 3, 0}, 1)),
            big(sample("big by 100 along 0", {arg({264, 512})}, by_size(100, 0))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ValueError>("split_size 0", [] { split(ones({4}), 0); }),
            expect<ShapeError>("sizes {1, 2} for size 4",
                               [] {
                                 split(ones({4}), {1, 2}, 0);
                               }),
            expect<ValueError>("negative size",
                               [] {
                                 split(ones({4}), {5, -1}, 0);
                               }),
            expect<ShapeError>("0-d", [] { split(ones({}), 1); }),
            expect<ShapeError>("dim 1 of 1-D", [] { split(ones({4}), 2, 1); }),
        };
      }));
  t.push_back(any_dtype_entry(
      "chunk",
      [] {
        auto chunks = [](int64_t n, int64_t dim) {
          return [n, dim](const std::vector<Tensor>& v) { return joined(chunk(v[0], n, dim)); };
        };
        return std::vector<Sample>{
            sample("(5, 3) in 2 along 0", {arg({5, 3})}, chunks(2, 0)),
            sample("(2, 3) in 5 along 1 (fewer chunks)", {arg({2, 3})}, chunks(5, 1)),
            sample("transposed (3, 4) in 2 along 1", {transposed({3, 4})}, chunks(2, 1)),
            sample("size-0", {arg({0, 3})}, chunks(2, 0)),
            big(sample("big in 3 along 1", {arg({264, 512})}, chunks(3, 1))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ValueError>("0 chunks", [] { chunk(ones({4}), 0); }),
            expect<ShapeError>("0-d", [] { chunk(ones({}), 2); }),
        };
      }));
  t.push_back(any_dtype_entry(
      "repeat",
      [] {
        auto rep = [](std::vector<int64_t> r) {
          return [r](const std::vector<Tensor>& v) { return repeat(v[0], r); };
        };
        return std::vector<Sample>{
            sample("(2, 3) by {2, 1}", {arg({2, 3})}, rep({2, 1})),
            sample("(2, 3) by {1, 2, 2} (new leading dim)", {arg({2, 3})}, rep({1, 2, 2})),
            sample("0-d by {3}", {arg({})}, rep({3})),
            sample("(2, 3) by {0, 2}", {arg({2, 3})}, rep({0, 2})),
            sample("size-0 (0, 2) by {2, 2}", {arg({0, 2})}, rep({2, 2})),
            sample("transposed (3, 4) by {1, 2}", {transposed({3, 4})}, rep({1, 2})),
            sample("expanded (3, 1) -> (3, 4) by {2, 1}", {expanded({3, 1}, {3, 4})}, rep({2, 1})),
            big(sample("big by {2, 1}", {arg({132, 512})}, rep({2, 1}))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ShapeError>("fewer repeats than dims",
                               [] {
                                 repeat(ones({2, 3}), {2});
                               }),
            expect<ValueError>("negative repeat", [] { repeat(ones({2}), {-1}); }),
        };
      }));
  t.push_back(any_dtype_entry(
      "repeat_interleave",
      [] {
        auto rep = [](int64_t r, std::optional<int64_t> dim) {
          return [r, dim](const std::vector<Tensor>& v) { return repeat_interleave(v[0], r, dim); };
        };
        auto counts = [](std::vector<int64_t> r, std::optional<int64_t> dim) {
          return [r, dim](const std::vector<Tensor>& v) {
            return repeat_interleave(v[0], from_vector(r, {static_cast<int64_t>(r.size())}), dim);
          };
        };
        return std::vector<Sample>{
            sample("(2, 3) x2, flattened", {arg({2, 3})}, rep(2, std::nullopt)),
            sample("(2, 3) x3 along 0", {arg({2, 3})}, rep(3, 0)),
            sample("transposed (3, 4) x2 along -1", {transposed({3, 4})}, rep(2, -1)),
            sample("(2, 3) x0 along 1", {arg({2, 3})}, rep(0, 1)),
            sample("0-d x3", {arg({})}, rep(3, std::nullopt)),
            sample("size-0", {arg({0, 3})}, rep(2, 0)),
            sample("counts {1, 0, 2} along 1", {arg({2, 3})}, counts({1, 0, 2}, 1)),
            sample("one count {2} along 0 of expanded", {expanded({1, 3}, {2, 3})}, counts({2}, 0)),
            big(sample("big x2 along 0", {arg({132, 512})}, rep(2, 0))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ValueError>("repeats -1", [] { repeat_interleave(ones({2}), -1); }),
            expect<DTypeError>("float repeats", [] { repeat_interleave(ones({2}), ones({2}), 0); }),
            expect<ShapeError>("3 counts for size 2",
                               [] { repeat_interleave(ones({2}), arange(3), 0); }),
            expect<ValueError>(
                "a negative count",
                [] {
                  repeat_interleave(ones({2}), from_vector<int64_t>({1, -1}, {2}), 0);
                }),
        };
      }));
  t.push_back(any_dtype_entry(
      "pad",
      [] {
        auto p = [](std::vector<int64_t> pads, double value) {
          return [pads, value](const std::vector<Tensor>& v) { return pad(v[0], pads, value); };
        };
        return std::vector<Sample>{
            sample("last dim {1, 2}", {arg({2, 3})}, p({1, 2}, 0)),
            sample("two dims {1, 0, 2, 1}, value 1", {arg({2, 3})}, p({1, 0, 2, 1}, 1)),
            sample("crop {-1, 1}", {arg({2, 3})}, p({-1, 1}, 0)),
            sample("crop everything {-2, -1}", {arg({2, 3})}, p({-2, -1}, 0)),
            sample("no pads on 0-d", {arg({})}, p({}, 0)),
            sample("size-0 (0, 3) padded {1, 1, 1, 1}", {arg({0, 3})}, p({1, 1, 1, 1}, 1)),
            sample("transposed (3, 4) {2, 0}", {transposed({3, 4})}, p({2, 0}, 0)),
            sample("expanded 4-D {1, 1}", {expanded({2, 1, 1, 2}, {2, 1, 3, 2})}, p({1, 1}, 0)),
            big(sample("big {3, 3}", {arg({264, 512})}, p({3, 3}, 0))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ShapeError>("odd number of pads",
                               [] {
                                 pad(ones({2, 3}), {1});
                               }),
            expect<ShapeError>("more pads than dims",
                               [] {
                                 pad(ones({3}), {1, 1, 1, 1});
                               }),
            expect<ShapeError>("crop below 0",
                               [] {
                                 pad(ones({3}), {-2, -2});
                               }),
            expect<DTypeError>("value 0.5 for int64 (would truncate)",
                               [] {
                                 pad(arange(3), {1, 1}, 0.5);
                               }),
        };
      }));
  for (auto [name, f] :
       {std::pair<const char*, Tensor (*)(const Tensor&, int64_t)>{"tril", tril},
        std::pair<const char*, Tensor (*)(const Tensor&, int64_t)>{"triu", triu}}) {
    t.push_back(any_dtype_entry(
        name,
        [f = f] {
          auto tri = [f](int64_t diagonal) {
            return [f, diagonal](const std::vector<Tensor>& v) { return f(v[0], diagonal); };
          };
          return std::vector<Sample>{
              sample("(3, 4) diagonal 0", {arg({3, 4})}, tri(0)),
              sample("(3, 4) diagonal 1", {arg({3, 4})}, tri(1)),
              sample("(4, 3) diagonal -2", {arg({4, 3})}, tri(-2)),
              sample("(2, 3) diagonal 5 (beyond)", {arg({2, 3})}, tri(5)),
              sample("batched (2, 3, 3)", {arg({2, 3, 3})}, tri(0)),
              sample("transposed (3, 4)", {transposed({3, 4})}, tri(0)),
              sample("expanded (1, 4) -> (3, 4)", {expanded({1, 4}, {3, 4})}, tri(-1)),
              sample("size-0 (0, 3)", {arg({0, 3})}, tri(0)),
              big(sample("big", {arg({264, 512})}, tri(3))),
          };
        },
        [f = f] {
          return std::vector<ErrorInput>{expect<ShapeError>("1-D", [f] { f(ones({3}), 0); })};
        }));
  }
  return t;
}

}  // namespace nabla::op_db
