// op_db entries: ordering (ops/sort.h: topk, sort) and the logit filters (ops/sampling.h:
// apply_temperature, top_k_filter, top_p_filter). Rows along the ordered dim: contiguous or
// not, of length 1 or 0, of equal values (an expanded row: ties keep their order, so the
// derivative stays defined), large, with ties and NaN (forward only), and the int64 indices.
// The filters set removed logits to -inf, which finite differences cannot difference, so their
// gradient samples go through softmax (the filters' use); their raw outputs are forward samples.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using Ordered = std::function<ValuesIndices(const Tensor&, int64_t dim)>;

// Values along dim, and the indices in the input's dtype so the layout and thread checks
// compare them too.
OpFn values_along(const Ordered& f, int64_t dim) {
  return [f, dim](const std::vector<Tensor>& v) { return f(v[0], dim).values; };
}
OpFn indices_along(const Ordered& f, int64_t dim) {
  return [f, dim](const std::vector<Tensor>& v) { return f(v[0], dim).indices.to(v[0].dtype()); };
}

std::vector<Sample> ordered_samples(const Ordered& f) {
  return {
      sample("dim -1 of (3, 5)", {arg({3, 5})}, values_along(f, -1)),
      sample("dim 1 of (2, 4, 3)", {arg({2, 4, 3})}, values_along(f, 1)),
      sample("dim 0 of 4-D (3, 1, 2, 2)", {arg({3, 1, 2, 2})}, values_along(f, 0)),
      sample("dim 0 of 0-d", {arg({})}, values_along(f, 0)),
      sample("rows of length 1 (3, 1)", {arg({3, 1})}, values_along(f, 1)),
      sample("size-0 batch (0, 3)", {arg({0, 3})}, values_along(f, 1)),
      sample("dim 1 of transposed (3, 4)", {transposed({3, 4})}, values_along(f, 1)),
      sample("dim 0 of transposed (3, 4)", {transposed({3, 4})}, values_along(f, 0)),
      sample("dim -1 of strided (2, 5)", {strided({2, 5})}, values_along(f, -1)),
      sample("expanded (equal) row (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4})},
             values_along(f, 1)),
      sample("dim 0 of expanded (1, 4) -> (3, 4)", {expanded({1, 4}, {3, 4})}, values_along(f, 0)),
      large(sample("large |x| <= 1e4 (3, 4)", {arg({3, 4}, kLarge)}, values_along(f, 1))),
      forward_only(sample("ties keep their order", {values({2, 4}, {1, 0, 1, 1, -2, 5, 5, -2})},
                          values_along(f, 1))),
      forward_only(
          float_only(sample("NaN and inf", {values({2, 3}, {NAN, 1, -INFINITY, 2, INFINITY, NAN})},
                            values_along(f, 1)))),
      sample("indices along dim 1 of transposed (3, 4)", {no_grad(transposed({3, 4}))},
             indices_along(f, 1)),
      sample("indices of ties", {no_grad(values({2, 4}, {1, 0, 1, 1, -2, 5, 5, -2}))},
             indices_along(f, 1)),
      big(sample("big: dim -1 of (264, 512)", {arg({264, 512})}, values_along(f, -1))),
      big(sample("big: dim 0 of (264, 512)", {arg({264, 512})}, indices_along(f, 0))),
  };
}

// The ordered dim's size, as topk sees it (a 0-d tensor counts as one element).
int64_t size_along(const Tensor& x, int64_t dim) { return x.dim() == 0 ? 1 : x.size(dim); }

using Filter = std::function<Tensor(const Tensor&)>;

std::vector<Sample> filter_samples(const Filter& f) {
  OpFn probs = [f](const std::vector<Tensor>& v) { return softmax(f(v[0]), -1); };
  OpFn raw = [f](const std::vector<Tensor>& v) { return f(v[0]); };
  return {
      sample("softmax of filtered (7)", {arg({7})}, probs),
      sample("softmax of filtered (3, 6)", {arg({3, 6})}, probs),
      sample("softmax of filtered (2, 3, 5)", {arg({2, 3, 5})}, probs),
      sample("softmax of filtered transposed (6, 3)", {transposed({3, 6})}, probs),
      sample("softmax of filtered strided (3, 6)", {strided({3, 6})}, probs),
      sample("softmax of filtered, expanded rows (1, 6) -> (3, 6)", {expanded({1, 6}, {3, 6})},
             probs),
      sample("softmax of filtered, rows of length 1 (4, 1)", {arg({4, 1})}, probs),
      sample("softmax of filtered, size-0 batch (0, 5)", {arg({0, 5})}, probs),
      sample("filtered, size-0 vocabulary (3, 0)", {arg({3, 0})}, raw),
      forward_only(sample("filtered logits (-inf where removed) (4, 6)", {arg({4, 6})}, raw)),
      forward_only(
          sample("filtered logits with ties", {values({2, 4}, {1, 1, 0, 1, 3, -1, 3, 3})}, raw)),
      big(sample("big: softmax of filtered (264, 512)", {arg({264, 512})}, probs)),
  };
}

OpInfo filter_entry(const std::string& name, Filter f, std::vector<ErrorInput> errors) {
  OpInfo op;
  op.name = name;
  op.samples = [f] { return filter_samples(f); };
  op.errors = [errors] { return errors; };
  return op;
}

}  // namespace

std::vector<OpInfo> sort_ops() {
  std::vector<OpInfo> t;
  t.push_back({
      .name = "sort",
      .samples =
          [] {
            std::vector<Sample> s =
                ordered_samples([](const Tensor& x, int64_t dim) { return sort(x, dim, false); });
            for (Sample& d :
                 ordered_samples([](const Tensor&x, int64_t dim) { return sort(x, dim, true); }))
              if (!d.big) {
                d.name = "descending: " + d.name;
                s.push_back(std::move(d));
              }
            return s;
          },
      .errors =
          [] {
            return std::vector{
                expect<ShapeError>("dim 2 of a 2-D tensor",
                                   [] {
                                     sort(ones({2, 3}), 2);
                                   }),
                expect<DTypeError>("bool input", [] { sort(zeros({3}, kBool)); }),
            };
          },
      .dtypes = {kFloat32, kFloat64, kInt64},
  });
  t.push_back({
      .name = "topk",
      .samples =
          [] {
            std::vector<Sample> s;
            // k = half the dim (largest), then the edges k = 0 and k = n (smallest).
            for (Sample& d : ordered_samples([](const Tensor&x, int64_t dim) {
                   return topk(x, (size_along(x, dim) + 1) / 2, dim);
                 }))
              s.push_back(std::move(d));
            for (Sample& d : without_big(ordered_samples(
                     [](const Tensor&x, int64_t dim) { return topk(x, 0, dim, false); }))) {
              d.name = "k = 0: " + d.name;
              s.push_back(std::move(d));
            }
            for (Sample& d : without_big(ordered_samples([](const Tensor&x, int64_t dim) {
                   return topk(x, size_along(x, dim), dim, false);
                 }))) {
              d.name = "k = n, smallest: " + d.name;
              s.push_back(std::move(d));
            }
            return s;
          },
      .errors =
          [] {
            return std::vector{
                expect<ValueError>("k larger than the dim",
                                   [] {
                                     topk(ones({2, 3}), 4);
                                   }),
                expect<ValueError>("negative k",
                                   [] {
                                     topk(ones({2, 3}), -1);
                                   }),
                expect<ShapeError>("dim 2 of a 2-D tensor",
                                   [] {
                                     topk(ones({2, 3}), 1, 2);
                                   }),
                expect<DTypeError>("bool input", [] { topk(zeros({3}, kBool), 1); }),
            };
          },
      .dtypes = {kFloat32, kFloat64, kInt64},
  });
  t.push_back({
      .name = "apply_temperature",
      .samples = [] { return unary_samples([](auto& v) { return apply_temperature(v[0], 0.7); }); },
      .errors =
          [] {
            return std::vector{
                expect<ValueError>("temperature 0", [] { apply_temperature(ones({3}), 0.0); }),
                expect<ValueError>("negative temperature",
                                   [] { apply_temperature(ones({3}), -1.0); }),
            };
          },
  });
  t.push_back(filter_entry(
      "top_k_filter", [](const Tensor& x) { return top_k_filter(x, 3); },
      {expect<ValueError>("k = 0", [] { top_k_filter(ones({3}), 0); }),
       expect<ShapeError>("0-d logits", [] { top_k_filter(scalar_tensor(1.0), 1); })}));
  t.push_back(filter_entry(
      "top_p_filter", [](const Tensor& x) { return top_p_filter(x, 0.7); },
      {expect<ValueError>("p = 0", [] { top_p_filter(ones({3}), 0.0); }),
       expect<ValueError>("p > 1", [] { top_p_filter(ones({3}), 1.5); }),
       expect<ShapeError>("0-d logits", [] { top_p_filter(scalar_tensor(1.0), 0.5); })}));
  return t;
}

}  // namespace nabla::op_db
