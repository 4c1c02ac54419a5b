// op_db entries: the softmax family (ops/softmax.h) and its composite twins. Rows along the
// softmax dim: contiguous or not, of length 1 or 0, of equal values (an expanded row), of
// magnitude 1e4 (stability), with -inf entries and fully masked.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using DimFn = Tensor (*)(const Tensor&, int64_t);

OpFn along(DimFn f, int64_t dim) {
  return [f, dim](const std::vector<Tensor>& v) { return f(v[0], dim); };
}

OpInfo softmax_like(const std::string& name, DimFn f) {
  OpInfo op;
  op.name = name;
  op.samples = [f] {
    return std::vector<Sample>{
        sample("dim -1 of (2, 3)", {arg({2, 3})}, along(f, -1)),
        sample("dim 0 of (3, 4)", {arg({3, 4})}, along(f, 0)),
        sample("dim 1 of (2, 3, 4)", {arg({2, 3, 4})}, along(f, 1)),
        sample("dim 2 of 4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2})}, along(f, 2)),
        sample("dim 0 of 0-d", {arg({})}, along(f, 0)),
        sample("rows of length 1 (3, 1)", {arg({3, 1})}, along(f, 1)),
        sample("size-0 batch (0, 3)", {arg({0, 3})}, along(f, 1)),
        sample("size-0 rows (2, 0)", {arg({2, 0})}, along(f, 1)),
        sample("dim -1 of transposed (3, 4)", {transposed({3, 4})}, along(f, -1)),
        sample("dim 0 of transposed (3, 4)", {transposed({3, 4})}, along(f, 0)),
        sample("dim -1 of strided (2, 3)", {strided({2, 3})}, along(f, -1)),
        sample("expanded (equal) row (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4})}, along(f, 1)),
        large(sample("large |x| <= 1e4 (3, 4)", {arg({3, 4}, kLarge)}, along(f, 1))),
        sample("-inf entries", {values({2, 3}, {-INFINITY, 0.5, 1, 2, -INFINITY, -1})},
               along(f, 1)),
        forward_only(sample("edge: a row of -inf", {values({2, 2}, {-INFINITY, -INFINITY, 1, 2})},
                            along(f, 1))),
        big(sample("big: dim -1 of (264, 512)", {arg({264, 512})}, along(f, -1))),
        big(sample("big: dim 0 of (264, 512)", {arg({264, 512})}, along(f, 0))),
    };
  };
  op.errors = [f] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("dim 2 of a 2-D tensor",
                           [f] {
                             f(ones({2, 3}), 2);
                           }),
        expect<DTypeError>("int64 input", [f] { f(arange(3), 0); }),
    };
  };
  return op;
}

// masked_softmax(x, mask, kind), fused or composite.
using MaskFn = Tensor (*)(const Tensor&, const Tensor&, MaskKind);

std::vector<Sample> mask_samples(MaskFn f) {
  OpFn with_bool = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], MaskKind::Bool); };
  OpFn additive = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], MaskKind::Additive); };
  Tensor keep_first = from_vector<bool>({true, false, false, true, true, true}, {2, 3});
  Tensor none_kept = from_vector<bool>({false, false, false, true, false, true}, {2, 3});
  return {
      sample("bool mask (2, 3, 4), same shape", {arg({2, 3, 4}), fixed(bool_mask({2, 3, 4}))},
             with_bool),
      sample("bool mask (3, 4) broadcast to (2, 3, 4)", {arg({2, 3, 4}), fixed(bool_mask({3, 4}))},
             with_bool),
      sample("bool mask, a row keeps one", {arg({2, 3}), fixed(keep_first)}, with_bool),
      sample("bool mask, a fully masked row (zeros)", {arg({2, 3}), fixed(none_kept)}, with_bool),
      sample("bool mask on transposed x", {transposed({3, 4}), fixed(bool_mask({3, 4}))},
             with_bool),
      sample("bool mask, size-0 (0, 3)", {arg({0, 3}), fixed(bool_mask({3}))}, with_bool),
      sample("bool mask, rows of length 1", {arg({3, 1}), fixed(bool_mask({3, 1}))}, with_bool),
      large(sample("bool mask, large |x| <= 1e4", {arg({3, 4}, kLarge), fixed(bool_mask({3, 4}))},
                   with_bool)),
      big(sample("big: bool mask (512)", {arg({264, 512}), fixed(bool_mask({512}))}, with_bool)),
      sample("additive mask (3, 4) with gradient", {arg({2, 3, 4}), arg({3, 4})}, additive),
      sample("additive mask, expanded (1, 4) -> (3, 4)", {arg({3, 4}), expanded({1, 4}, {3, 4})},
             additive),
      sample("additive mask with -inf, no gradient",
             {arg({2, 3}), no_grad(values({2, 3}, {0, -INFINITY, 0, -INFINITY, -INFINITY, 1}))},
             additive),
      big(sample("big: additive mask", {arg({264, 512}), arg({264, 512})}, additive)),
  };
}

std::vector<ErrorInput> mask_errors(MaskFn f, bool fused) {
  std::vector<ErrorInput> e = {
      expect<DTypeError>(
          "Bool kind with a float mask",
          [f] {
            f(ones({2, 3}), ones({2, 3}), MaskKind::Bool);
          },
          "masked_softmax"),
      expect<ShapeError>(
          "mask (4) on x (2, 3)",
          [f] {
            f(ones({2, 3}), ones({4}, kBool), MaskKind::Bool);
          },
          "masked_softmax"),
      expect<DTypeError>(
          "int64 x", [f] { f(arange(3), ones({3}, kBool), MaskKind::Bool); }, "masked_softmax"),
  };
  if (fused)
    e.push_back(expect<DTypeError>(
        "Additive kind with a float64 mask on float32 x",
        [f] {
          f(ones({2, 3}), zeros({2, 3}, kFloat64), MaskKind::Additive);
        },
        "masked_softmax"));
  return e;
}

}  // namespace

std::vector<OpInfo> softmax_ops() {
  std::vector<OpInfo> t;
  t.push_back(softmax_like("softmax", softmax));
  t.push_back(softmax_like("log_softmax", log_softmax));
  t.push_back(softmax_like("softmax_composite", softmax_composite));
  t.push_back(softmax_like("log_softmax_composite", log_softmax_composite));
  {
    OpInfo op;
    op.name = "masked_softmax";
    op.samples = [] {
      auto s = mask_samples(masked_softmax);
      OpFn lens = [](const std::vector<Tensor>& v) { return masked_softmax(v[0], v[1]); };
      auto L = [](std::vector<int64_t> v, Shape shape) { return fixed(from_vector(v, shape)); };
      s.push_back(
          sample("valid_lens (B,) = [1, 3] on (2, 3, 4)", {arg({2, 3, 4}), L({1, 3}, {2})}, lens));
      s.push_back(sample("valid_lens (B, Q) with a 0 (zero row) on (2, 3, 4)",
                         {arg({2, 3, 4}), L({0, 1, 2, 4, 3, 9}, {2, 3})}, lens));
      s.push_back(
          sample("valid_lens on 4-D (2, 2, 3, 4)", {arg({2, 2, 3, 4}), L({2, 4}, {2})}, lens));
      s.push_back(
          sample("valid_lens on transposed (2, 4)", {transposed({2, 4}), L({3, 1}, {2})}, lens));
      s.push_back(sample("valid_lens, size-0 batch", {arg({0, 3}), L({}, {0})}, lens));
      return s;
    };
    op.errors = [] {
      auto e = mask_errors(masked_softmax, true);
      e.push_back(expect<DTypeError>("float valid_lens", [] {
        masked_softmax(ones({2, 3}), ones({2}));
      }));
      e.push_back(expect<ShapeError>("valid_lens (3,) for batch 2", [] {
        masked_softmax(ones({2, 3}), arange(3));
      }));
      e.push_back(expect<ValueError>("negative valid length", [] {
        masked_softmax(ones({2, 3}), from_vector<int64_t>({1, -1}, {2}));
      }));
      return e;
    };
    t.push_back(op);
  }
  t.push_back({
      .name = "masked_softmax_composite",
      .samples = [] { return mask_samples(masked_softmax_composite); },
      .errors = [] { return mask_errors(masked_softmax_composite, false); },
  });
  return t;
}

}  // namespace nabla::op_db
