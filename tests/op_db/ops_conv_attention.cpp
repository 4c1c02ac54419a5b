// op_db entries: image patches, unfold and fold (ops/patches.h) and scaled dot-product attention
// (ops/attention.h) with its composite twin: strides, padding, dilation, windows that overlap or
// skip pixels, bool and additive masks, causal masks on square and non-square scores, fully masked
// queries, dropout with a fixed generator, and batch dims that are expanded or transposed.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using Int2 = std::array<int64_t, 2>;

std::vector<Sample> patch_samples() {
  auto patch = [](int64_t p) {
    return [p](const std::vector<Tensor>& v) { return patchify(v[0], p); };
  };
  return {
      sample("(2, 3, 4, 6) p 2", {arg({2, 3, 4, 6})}, patch(2)),
      sample("p 1", {arg({1, 2, 2, 3})}, patch(1)),
      sample("one patch", {arg({1, 1, 3, 3})}, patch(3)),
      sample("batch 0", {arg({0, 1, 2, 2})}, patch(2)),
      sample("transposed H, W", {transposed({1, 2, 4, 2})}, patch(2)),
      sample("expanded channels", {expanded({2, 1, 4, 4}, {2, 3, 4, 4})}, patch(2)),
      big(sample("big (8, 3, 96, 96) p 8", {arg({8, 3, 96, 96})}, patch(8))),
  };
}

std::vector<Sample> unpatch_samples() {
  auto unpatch = [](int64_t p, int64_t H, int64_t W) {
    return [p, H, W](const std::vector<Tensor>& v) { return unpatchify(v[0], p, H, W); };
  };
  return {
      sample("(2, 6, 12) p 2 to (4, 6)", {arg({2, 6, 12})}, unpatch(2, 4, 6)),
      sample("p 1", {arg({1, 6, 2})}, unpatch(1, 2, 3)),
      sample("transposed patches", {transposed({1, 4, 8})}, unpatch(2, 4, 4)),
      sample("batch 0", {arg({0, 4, 4})}, unpatch(2, 4, 4)),
      big(sample("big (8, 144, 192) p 8", {arg({8, 144, 192})}, unpatch(8, 96, 96))),
  };
}

std::vector<Sample> unfold_samples() {
  auto uf = [](Int2 k, Int2 s, Int2 p, Int2 d = {1, 1}) {
    return [k, s, p, d](const std::vector<Tensor>& v) { return unfold(v[0], k, s, p, d); };
  };
  return {
      sample("(1, 2, 4, 5) kernel 2x3", {arg({1, 2, 4, 5})}, uf({2, 3}, {1, 1}, {0, 0})),
      sample("stride 2, padding 1", {arg({2, 1, 5, 4})}, uf({3, 3}, {2, 2}, {1, 1})),
      sample("stride 3 skips pixels", {arg({1, 1, 7, 7})}, uf({2, 2}, {3, 3}, {0, 0})),
      sample("kernel = image", {arg({1, 2, 3, 3})}, uf({3, 3}, {1, 1}, {0, 0})),
      sample("1x1 kernel", {arg({1, 3, 2, 2})}, uf({1, 1}, {1, 1}, {0, 0})),
      sample("transposed image", {transposed({1, 2, 5, 4})}, uf({2, 2}, {1, 2}, {1, 0})),
      sample("dilation 2, padding 1", {arg({1, 2, 5, 6})}, uf({2, 3}, {1, 1}, {1, 1}, {2, 2})),
      sample("dilation (1, 3), stride 2", {arg({2, 1, 5, 8})}, uf({2, 2}, {2, 2}, {0, 0}, {1, 3})),
      sample("batch 0", {arg({0, 2, 4, 4})}, uf({2, 2}, {1, 1}, {0, 0})),
      sample("batch 0, dilation 2", {arg({0, 1, 5, 5})}, uf({2, 2}, {1, 1}, {0, 0}, {2, 2})),
      big(sample("big (4, 8, 32, 32) kernel 3 padding 1", {arg({4, 8, 32, 32})},
                 uf({3, 3}, {1, 1}, {1, 1}))),
  };
}

std::vector<Sample> fold_samples() {
  auto fd = [](Int2 out, Int2 k, Int2 s, Int2 p, Int2 d = {1, 1}) {
    return [out, k, s, p, d](const std::vector<Tensor>& v) { return fold(v[0], out, k, s, p, d); };
  };
  return {
      sample("(1, 6, 6) to 4x5, kernel 2x3", {arg({1, 12, 9})}, fd({4, 5}, {2, 3}, {1, 1}, {0, 0})),
      sample("overlaps summed: stride 1, padding 1", {arg({2, 9, 16})},
             fd({4, 4}, {3, 3}, {1, 1}, {1, 1})),
      sample("stride 3 leaves pixels empty", {arg({1, 4, 4})}, fd({5, 5}, {2, 2}, {3, 3}, {0, 0})),
      sample("transposed columns", {transposed({1, 4, 9})}, fd({4, 4}, {2, 2}, {1, 1}, {0, 0})),
      sample("dilation 2: (1, 2*4, 9) to 5x5", {arg({1, 8, 9})},
             fd({5, 5}, {2, 2}, {1, 1}, {0, 0}, {2, 2})),
      sample("dilation (2, 1), stride 2, padding 1", {arg({2, 6, 6})},
             fd({4, 5}, {2, 3}, {2, 2}, {1, 1}, {2, 1})),
      sample("batch 0", {arg({0, 4, 9})}, fd({4, 4}, {2, 2}, {1, 1}, {0, 0})),
      big(sample("big (4, 72, 1024)", {arg({4, 72, 1024})}, fd({32, 32}, {3, 3}, {1, 1}, {1, 1}))),
  };
}

using SdpaFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const SdpaOptions&);

// Options from the sample: v[3], if present, is the mask.
OpFn attend(SdpaFn f, SdpaOptions o) {
  return [f, o](const std::vector<Tensor>& v) {
    SdpaOptions opts = o;
    if (v.size() > 3) opts.attn_mask = v[3];
    Generator gen(11);  // the same dropout mask at every evaluation
    if (opts.dropout_p > 0) opts.generator = &gen;
    return f(v[0], v[1], v[2], opts);
  };
}

std::vector<Sample> sdpa_samples(SdpaFn f) {
  SdpaOptions plain, causal, scaled, drop;
  causal.is_causal = true;
  scaled.scale = 0.3;
  drop.dropout_p = 0.3;
  Tensor masked_query = from_vector<bool>({false, false, false, true, true, false}, {2, 3});
  return {
      sample("(2, 3, 4) (2, 5, 4) (2, 5, 6)", {arg({2, 3, 4}), arg({2, 5, 4}), arg({2, 5, 6})},
             attend(f, plain)),
      sample("4-D heads (2, 2, 3, 4)", {arg({2, 2, 3, 4}), arg({2, 2, 3, 4}), arg({2, 2, 3, 4})},
             attend(f, plain)),
      sample("2-D (no batch)", {arg({3, 4}), arg({5, 4}), arg({5, 2})}, attend(f, plain)),
      sample("causal, square", {arg({2, 4, 3}), arg({2, 4, 3}), arg({2, 4, 3})}, attend(f, causal)),
      sample("causal, L 3 < S 5", {arg({1, 3, 2}), arg({1, 5, 2}), arg({1, 5, 2})},
             attend(f, causal)),
      sample("scale 0.3", {arg({1, 3, 4}), arg({1, 3, 4}), arg({1, 3, 4})}, attend(f, scaled)),
      sample("bool mask (3, 5) broadcast",
             {arg({2, 3, 4}), arg({2, 5, 4}), arg({2, 5, 4}), fixed(bool_mask({3, 5}))},
             attend(f, plain)),
      sample("bool mask, a fully masked query (zero output)",
             {arg({1, 2, 4}), arg({1, 3, 4}), arg({1, 3, 4}), fixed(masked_query)},
             attend(f, plain)),
      sample("additive mask with gradient",
             {arg({2, 3, 4}), arg({2, 5, 4}), arg({2, 5, 4}), arg({3, 5})}, attend(f, plain)),
      sample("additive mask with -inf, no gradient",
             {arg({1, 2, 2}), arg({1, 3, 2}), arg({1, 3, 2}),
              no_grad(values({2, 3}, {0, -INFINITY, 1, -INFINITY, 0, 0}))},
             attend(f, plain)),
      sample("dropout 0.3, fixed generator", {arg({2, 3, 4}), arg({2, 5, 4}), arg({2, 5, 4})},
             attend(f, drop)),
      sample("transposed q, strided v, expanded k",
             {transposed({2, 3, 4}), expanded({1, 5, 4}, {2, 5, 4}), strided({2, 5, 2})},
             attend(f, plain)),
      sample("L = 0", {arg({2, 0, 4}), arg({2, 3, 4}), arg({2, 3, 4})}, attend(f, plain)),
      sample("S = 0 (zero output)", {arg({2, 3, 4}), arg({2, 0, 4}), arg({2, 0, 4})},
             attend(f, plain)),
      large(sample("large q |x| <= 1e4 (saturated weights)",
                   {arg({1, 3, 4}, kLarge), arg({1, 3, 4}), arg({1, 3, 4})}, attend(f, plain))),
      big(sample("big (16, 128, 16)", {arg({16, 128, 16}), arg({16, 128, 16}), arg({16, 128, 16})},
                 attend(f, causal))),
  };
}

std::vector<ErrorInput> sdpa_errors(SdpaFn f) {
  const char* name = "scaled_dot_product_attention";
  return {
      expect<ShapeError>(
          "E 4 vs 3",
          [f] {
            f(ones({2, 3, 4}), ones({2, 5, 3}), ones({2, 5, 4}), {});
          },
          name),
      expect<ShapeError>(
          "S 5 vs 4",
          [f] {
            f(ones({2, 3, 4}), ones({2, 5, 4}), ones({2, 4, 4}), {});
          },
          name),
      expect<DTypeError>(
          "float64 k",
          [f] {
            f(ones({2, 3, 4}), ones({2, 5, 4}, kFloat64), ones({2, 5, 4}), {});
          },
          name),
      expect<ValueError>(
          "dropout_p 2",
          [f] {
            SdpaOptions o;
            o.dropout_p = 2;
            f(ones({1, 3, 4}), ones({1, 3, 4}), ones({1, 3, 4}), o);
          },
          name),
      expect<ShapeError>(
          "mask (3, 4) for scores (3, 5)",
          [f] {
            SdpaOptions o;
            o.attn_mask = ones({3, 4}, kBool);
            f(ones({1, 3, 4}), ones({1, 5, 4}), ones({1, 5, 4}), o);
          },
          name),
      expect<DTypeError>(
          "int64 mask",
          [f] {
            SdpaOptions o;
            o.attn_mask = zeros({3, 5}, kInt64);
            f(ones({1, 3, 4}), ones({1, 5, 4}), ones({1, 5, 4}), o);
          },
          name),
  };
}

}  // namespace

std::vector<OpInfo> conv_attention_ops() {
  std::vector<OpInfo> t;
  t.push_back(entry("patchify", patch_samples, [] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("3-D input",
                           [] {
                             patchify(ones({2, 4, 4}), 2);
                           }),
        expect<ShapeError>("5 not divisible by 2",
                           [] {
                             patchify(ones({1, 1, 4, 5}), 2);
                           }),
        expect<ShapeError>("p 0",
                           [] {
                             patchify(ones({1, 1, 4, 4}), 0);
                           }),
    };
  }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64, kBool};
  t.push_back(entry("unpatchify", unpatch_samples, [] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("6 patches for 2x2 grid",
                           [] {
                             unpatchify(ones({1, 6, 4}), 2, 4, 4);
                           }),
        expect<ShapeError>("H not divisible",
                           [] {
                             unpatchify(ones({1, 4, 4}), 2, 5, 4);
                           }),
    };
  }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64, kBool};
  t.push_back(entry("unfold", unfold_samples, [] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("3-D input",
                           [] {
                             unfold(ones({2, 4, 4}), {2, 2});
                           }),
        expect<ShapeError>("kernel larger than image",
                           [] {
                             unfold(ones({1, 1, 2, 2}), {3, 3});
                           }),
        expect<ValueError>("stride 0",
                           [] {
                             unfold(ones({1, 1, 4, 4}), {2, 2}, {0, 1});
                           }),
        expect<ValueError>("negative padding",
                           [] {
                             unfold(ones({1, 1, 4, 4}), {2, 2}, {1, 1}, {-1, 0});
                           }),
        expect<ValueError>("dilation 0",
                           [] {
                             unfold(ones({1, 1, 4, 4}), {2, 2}, {1, 1}, {0, 0}, {0, 1});
                           }),
        expect<ShapeError>("dilation 3 spans 4 > image 3",
                           [] {
                             unfold(ones({1, 1, 3, 3}), {2, 2}, {1, 1}, {0, 0}, {3, 3});
                           }),
    };
  }));
  t.push_back(entry("fold", fold_samples, [] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("2-D input",
                           [] {
                             fold(ones({4, 9}), {4, 4}, {2, 2});
                           }),
        expect<ShapeError>("dim 1 not a multiple of the kernel",
                           [] {
                             fold(ones({1, 5, 9}), {4, 4}, {2, 2});
                           }),
        expect<ShapeError>("L 8 for 9 windows",
                           [] {
                             fold(ones({1, 4, 8}), {4, 4}, {2, 2});
                           }),
        expect<ShapeError>("L 9 for 4 windows with dilation 2",
                           [] {
                             fold(ones({1, 4, 9}), {4, 4}, {2, 2}, {1, 1}, {0, 0}, {2, 2});
                           }),
        expect<ValueError>("dilation -1",
                           [] {
                             fold(ones({1, 4, 9}), {4, 4}, {2, 2}, {1, 1}, {0, 0}, {-1, 1});
                           }),
    };
  }));
  for (auto [name, f] : {std::pair<const char*, SdpaFn>{"scaled_dot_product_attention",
                                                        scaled_dot_product_attention},
                         std::pair<const char*, SdpaFn>{"scaled_dot_product_attention_composite",
                                                        scaled_dot_product_attention_composite}}) {
    t.push_back(entry(
        name, [f = f] { return sdpa_samples(f); }, [f = f] { return sdpa_errors(f); }));
    t.back().layouts = kGemmLayouts;
    t.back().note = kGemmLayoutsNote;
  }
  return t;
}

}  // namespace nabla::op_db
