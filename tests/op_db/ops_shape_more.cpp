// op_db entries: ops/shape_more.h (flip roll tile unbind movedim, every dtype), ops/reduce_more.h
// (prod amax amin) and ops/scatter.h (scatter masked_select). unbind returns views; its samples
// concatenate the flattened pieces, so every piece's values and gradients are checked.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

const std::vector<DType> kNumeric = {kFloat32, kFloat64, kInt64};

// The standard layouts of one argument under f.
std::vector<Sample> shape_layouts(const std::function<Tensor(const Tensor&)>& f, Shape base) {
  return {
      sample("(2, 3, 4)", {arg({2, 3, 4})}, on_first(f)),
      sample("transposed (3, 4)", {transposed({3, 4})}, on_first(f)),
      sample("strided (3, 4)", {strided({3, 4})}, on_first(f)),
      sample("expanded (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4})}, on_first(f)),
      sample("size-1 (1, 1)", {arg({1, 1})}, on_first(f)),
      sample("size-0 (0, 4)", {arg({0, 4})}, on_first(f)),
      big(sample("big", {arg(std::move(base))}, on_first(f))),
  };
}

OpInfo with_dtypes(OpInfo op, std::vector<DType> dtypes) {
  op.dtypes = std::move(dtypes);
  return op;
}

std::vector<Sample> prod_samples() {
  auto along = [](int64_t d, bool keep) {
    return on_first([d, keep](const Tensor& x) { return prod(x, d, keep); });
  };
  return {
      sample("(3, 4) dim 1", {arg({3, 4})}, along(1, false)),
      sample("(2, 3, 4) dim 0 keepdim", {arg({2, 3, 4})}, along(0, true)),
      sample("transposed dim -1", {transposed({3, 4})}, along(-1, false)),
      sample("expanded dim 1", {expanded({3, 1}, {3, 4})}, along(1, false)),
      sample("strided dim 0", {strided({3, 4})}, along(0, false)),
      sample("0-d", {arg({})}, along(0, false)),
      sample("size-0 dim reduced (empty product = 1)", {arg({2, 0})}, along(1, false)),
      sample("size-0 dim kept", {arg({0, 3})}, along(1, false)),
      sample("one zero in a row", {values({2, 3}, {1.5, 0, -2, 0.5, 1.25, -1})}, along(1, false)),
      sample("two zeros in a row", {values({2, 3}, {0, 1.5, 0, 0.5, 1.25, -1})}, along(1, false)),
      sample("all elements", {arg({3, 4})}, on_first([](const Tensor& x) { return prod(x); })),
      sample("all elements with a zero", {values({2, 2}, {1.5, -0.5, 0, 2})},
             on_first([](const Tensor& x) { return prod(x); })),
      big(sample("big dim 0, values near 1", {arg({264, 512}, {0.99, 1.01})}, along(0, false))),
  };
}

std::vector<Sample> extreme_samples(Tensor (*f)(const Tensor&, const std::vector<int64_t>&, bool)) {
  auto over = [f](std::vector<int64_t> dims, bool keep) {
    return on_first([f, dims, keep](const Tensor& x) { return f(x, dims, keep); });
  };
  return {
      sample("(3, 4) dim 1", {arg({3, 4})}, over({1}, false)),
      sample("(2, 3, 4) dims (0, 2) keepdim", {arg({2, 3, 4})}, over({0, 2}, true)),
      sample("all dims", {arg({3, 4})}, over({}, false)),
      sample("transposed dim -1", {transposed({3, 4})}, over({-1}, false)),
      sample("expanded dim 1 (ties from the expand)", {expanded({3, 1}, {3, 4})}, over({1}, false)),
      sample("strided dim 0", {strided({3, 4})}, over({0}, false)),
      sample("0-d", {arg({})}, over({}, false)),
      sample("size-0 kept dim", {arg({0, 3})}, over({1}, false)),
      forward_only(sample("kink: ties split the gradient", {values({2, 3}, {1, 3, 3, 2, 2, 2})},
                          over({1}, false))),
      big(sample("big dim 1", {arg({264, 512})}, over({1}, false))),
  };
}

std::vector<ErrorInput> extreme_errors(Tensor (*f)(const Tensor&, const std::vector<int64_t>&,
                                                   bool)) {
  return {expect<ShapeError>("empty reduced dim",
                             [f] {
                               f(ones({2, 0}), {1}, false);
                             }),
          expect<ShapeError>("dim 2 of 2-D",
                             [f] {
                               f(ones({2, 3}), {2}, false);
                             }),
          expect<ShapeError>("dim twice",
                             [f] {
                               f(ones({2, 3}), {1, -1}, false);
                             }),
          expect<DTypeError>("bool", [f] { f(ones({2}, kBool), {}, false); })};
}

}  // namespace

std::vector<OpInfo> shape_more_ops() {
  std::vector<OpInfo> t;
  t.push_back(
      with_dtypes(entry(
                      "flip",
                      [] {
                        std::vector<Sample> s = shape_layouts(
                            [](const Tensor& x) {
                              return flip(x, {0, -1});
                            },
                            {264, 512});
                        s.push_back(sample("0-d, no dims", {arg({})},
                                           on_first([](const Tensor& x) { return flip(x, {}); })));
                        s.push_back(sample("middle dim of 3-D", {arg({2, 3, 4})},
                                           on_first([](const Tensor& x) { return flip(x, {1}); })));
                        return s;
                      },
                      [] {
                        return std::vector{expect<ShapeError>("dim 2 of 2-D",
                                                              [] {
                                                                flip(ones({2, 3}), {2});
                                                              }),
                                           expect<ShapeError>("dim twice", [] {
                                             flip(ones({2, 3}), {0, -2});
                                           })};
                      }),
                  kAllDTypes));
  t.push_back(
      with_dtypes(entry(
                      "roll",
                      [] {
                        std::vector<Sample> s = shape_layouts(
                            [](const Tensor& x) {
                              return roll(x, {1, -5}, {0, -1});
                            },
                            {264, 512});
                        s.push_back(sample("flattened", {arg({2, 3})},
                                           on_first([](const Tensor& x) { return roll(x, {4}); })));
                        s.push_back(sample("shift 0 and a full turn", {arg({2, 3})},
                                           on_first([](const Tensor& x) {
                                             return roll(x, {0, 3}, {0, 1});
                                           })));
                        s.push_back(sample("0-d flattened", {arg({})},
                                           on_first([](const Tensor& x) { return roll(x, {2}); })));
                        return s;
                      },
                      [] {
                        return std::vector{expect<ShapeError>("shifts and dims differ",
                                                              [] {
                                                                roll(ones({2, 3}), {1, 2}, {0});
                                                              }),
                                           expect<ShapeError>("two shifts, no dims",
                                                              [] {
                                                                roll(ones({2, 3}), {1, 2});
                                                              }),
                                           expect<ShapeError>("dim 2 of 2-D", [] {
                                             roll(ones({2, 3}), {1}, {2});
                                           })};
                      }),
                  kAllDTypes));
  t.push_back(with_dtypes(
      entry(
          "tile",
          [] {
            std::vector<Sample> s = shape_layouts(
                [](const Tensor& x) {
                  return tile(x, {2, 1});
                },
                {132, 256});
            s.push_back(sample("fewer reps than dims", {arg({2, 3, 2})},
                               on_first([](const Tensor& x) { return tile(x, {3}); })));
            s.push_back(sample("more reps than dims", {arg({2, 3})}, on_first([](const Tensor& x) {
                                 return tile(x, {2, 1, 2});
                               })));
            s.push_back(
                sample("0-d", {arg({})}, on_first([](const Tensor& x) { return tile(x, {3}); })));
            s.push_back(sample("zero reps", {arg({2, 3})}, on_first([](const Tensor& x) {
                                 return tile(x, {0, 2});
                               })));
            return s;
          },
          [] {
            return std::vector{expect<ValueError>("negative rep", [] { tile(ones({2}), {-1}); })};
          }),
      kAllDTypes));
  t.push_back(with_dtypes(entry(
                              "unbind",
                              [] {
                                auto joined = [](int64_t d) {
                                  return on_first([d](const Tensor& x) {
                                    std::vector<Tensor> flat;
                                    for (const Tensor& p : unbind(x, d))
                                      flat.push_back(p.reshape({-1}));
                                    return flat.empty() ? x.reshape({-1}) : cat(flat, 0);
                                  });
                                };
                                return std::vector{
                                    sample("(2, 3, 4) dim 1", {arg({2, 3, 4})}, joined(1)),
                                    sample("transposed dim -1", {transposed({3, 4})}, joined(-1)),
                                    sample("expanded dim 0", {expanded({3, 1}, {3, 4})}, joined(0)),
                                    sample("strided dim 1", {strided({3, 4})}, joined(1)),
                                    sample("size-1 dim", {arg({1, 3})}, joined(0)),
                                    sample("1-D to 0-d pieces", {arg({3})}, joined(0)),
                                    sample("size-0 dim (no pieces)", {arg({0, 3})}, joined(0)),
                                };
                              },
                              [] {
                                return std::vector{
                                    expect<ShapeError>("0-d", [] { unbind(ones({}), 0); }),
                                    expect<ShapeError>("dim 2 of 2-D", [] {
                                      unbind(ones({2, 3}), 2);
                                    })};
                              }),
                          kAllDTypes));
  t.push_back(with_dtypes(
      entry(
          "movedim",
          [] {
            std::vector<Sample> s =
                shape_layouts([](const Tensor& x) { return movedim(x, 0, -1); }, {264, 512});
            s.push_back(
                sample("two dims of 4-D", {arg({2, 3, 4, 5})}, on_first([](const Tensor& x) {
                         return movedim(x, {0, 3}, {2, 0});
                       })));
            s.push_back(sample("0-d, no dims", {arg({})}, on_first([](const Tensor& x) {
                                 return movedim(x, std::vector<int64_t>{}, {});
                               })));
            return s;
          },
          [] {
            return std::vector{expect<ShapeError>("lengths differ",
                                                  [] {
                                                    movedim(ones({2, 3}), {0, 1}, {1});
                                                  }),
                               expect<ShapeError>("source twice",
                                                  [] {
                                                    movedim(ones({2, 3}), {0, 0}, {0, 1});
                                                  }),
                               expect<ShapeError>("destination out of range", [] {
                                 movedim(ones({2, 3}), 0, 2);
                               })};
          }),
      kAllDTypes));
  t.push_back(with_dtypes(entry("prod", prod_samples,
                                [] {
                                  return std::vector{
                                      expect<ShapeError>("dim 2 of 2-D",
                                                         [] {
                                                           prod(ones({2, 3}), 2);
                                                         }),
                                      expect<DTypeError>("bool", [] { prod(ones({2}, kBool)); })};
                                }),
                          kNumeric));
  t.push_back(with_dtypes(
      entry(
          "amax", [] { return extreme_samples(amax); }, [] { return extreme_errors(amax); }),
      kNumeric));
  t.push_back(with_dtypes(
      entry(
          "amin", [] { return extreme_samples(amin); }, [] { return extreme_errors(amin); }),
      kNumeric));
  t.push_back(with_dtypes(
      entry(
          "scatter",
          [] {
            auto sc = [](int64_t dim) {
              return [dim](const std::vector<Tensor>& v) { return scatter(v[0], dim, v[1], v[2]); };
            };
            auto sv = [](int64_t dim) {
              return [dim](const std::vector<Tensor>& v) { return scatter(v[0], dim, v[1], 1.0); };
            };
            // Distinct targets per column: with duplicates only one write survives and the
            // gradient of the others is a convention (gather's), not a derivative.
            return std::vector{
                sample("dim 0",
                       {arg({3, 4}), fixed(idx({2, 0, 1, 1, 0, 2, 2, 0}, {2, 4})), arg({2, 4})},
                       sc(0)),
                sample("dim 1, src larger than index",
                       {arg({2, 5}), fixed(idx({4, 0, 1, 3}, {2, 2})), arg({3, 3})}, sc(1)),
                sample("value form", {arg({3, 4}), fixed(idx({0, 3, 1, 2, 2, 0}, {3, 2}))}, sv(1)),
                sample("0-d", {arg({}), fixed(idx({0}, {})), arg({})}, sc(0)),
                sample("empty index", {arg({3, 4}), fixed(idx({}, {3, 0})), arg({3, 2})}, sc(1)),
                sample(
                    "transposed x, strided src",
                    {transposed({3, 4}), fixed(idx({1, 3, 0, 2, 3, 1}, {3, 2})), strided({3, 2})},
                    sc(1)),
                sample("expanded src, 3-D",
                       {arg({2, 3, 4}), fixed(idx({0, 2, 1, 3, 3, 0, 2, 1, 1, 0, 0, 3}, {2, 3, 2})),
                        expanded({2, 1, 2}, {2, 3, 2})},
                       sc(2)),
                big(sample("big dim 1",
                           {arg({264, 512}), fixed(arange(256).expand({264, 256}).contiguous()),
                            arg({264, 256})},
                           sc(1))),
            };
          },
          [] {
            return std::vector{
                expect<IndexError>("index 4 of size 4",
                                   [] {
                                     scatter(ones({2, 4}), 1, idx({4, 0}, {2, 1}), ones({2, 1}));
                                   }),
                expect<IndexError>("index -1",
                                   [] {
                                     scatter(ones({2, 4}), 1, idx({-1, 0}, {2, 1}), 0.0);
                                   }),
                expect<ShapeError>(
                    "src smaller than index",
                    [] {
                      scatter(ones({2, 4}), 1, idx({0, 0, 0, 0}, {2, 2}), ones({2, 1}));
                    }),
                expect<ShapeError>("index rank 1 for 2-D x",
                                   [] {
                                     scatter(ones({2, 4}), 1, idx({0, 1}, {2}), 0.0);
                                   }),
                expect<DTypeError>(
                    "float64 src",
                    [] {
                      scatter(ones({2, 4}), 1, idx({0, 0}, {2, 1}), ones({2, 1}, kFloat64));
                    }),
                expect<DTypeError>("float32 index",
                                   [] {
                                     scatter(ones({2, 4}), 1, ones({2, 1}), 0.0);
                                   }),
                expect<DTypeError>("2.5 into int64", [] {
                  scatter(arange(4).view({2, 2}), 1, idx({0, 0}, {2, 1}), 2.5);
                })};
          }),
      kAllDTypes));
  t.push_back(with_dtypes(
      entry(
          "masked_select",
          [] {
            OpFn ms = [](const std::vector<Tensor>& v) { return masked_select(v[0], v[1]); };
            return std::vector{
                sample("(3, 4) by (3, 4)", {arg({3, 4}), fixed(bool_mask({3, 4}))}, ms),
                sample("mask broadcast (4)", {arg({3, 4}), fixed(bool_mask({4}))}, ms),
                sample("x broadcast (3, 1) by (3, 4)", {arg({3, 1}), fixed(bool_mask({3, 4}))}, ms),
                sample("transposed x", {transposed({3, 4}), fixed(bool_mask({3, 4}))}, ms),
                sample("strided x, expanded", {strided({3, 4}), fixed(bool_mask({1, 4}))}, ms),
                sample("0-d", {arg({}), fixed(full({}, 1.0, kBool))}, ms),
                sample("size-0", {arg({0, 4}), fixed(bool_mask({4}))}, ms),
                sample("nothing selected", {arg({2, 3}), fixed(zeros({2, 3}, kBool))}, ms),
                big(sample("big", {arg({264, 512}), fixed(bool_mask({264, 512}))}, ms)),
            };
          },
          [] {
            return std::vector{
                expect<DTypeError>("int64 mask",
                                   [] {
                                     masked_select(ones({2, 3}), ones({2, 3}, kInt64));
                                   }),
                expect<ShapeError>("shapes (2, 3) and (4)", [] {
                  masked_select(ones({2, 3}), ones({4}, kBool));
                })};
          }),
      kAllDTypes));
  return t;
}

}  // namespace nabla::op_db
