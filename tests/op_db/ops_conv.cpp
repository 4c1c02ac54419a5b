// op_db entries: the convolutions (ops/conv.h), conv1d, conv2d and conv2d's composite twin over
// unfold and matmul: stride, padding by size, "same" (an odd total at the end) and "valid",
// dilation, groups and depthwise, no bias, inputs without the batch dim, a batch of 0, and
// non-contiguous or expanded inputs, weights and biases.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using Conv2dFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, Size2, ConvPadding<2>,
                            Size2, int64_t);

// The op with its other arguments bound; v[2], if present, is the bias.
OpFn conv2d_with(Conv2dFn f, Size2 stride = 1, ConvPadding<2> padding = 0, Size2 dilation = 1,
                 int64_t groups = 1) {
  return [=](const std::vector<Tensor>& v) {
    return f(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), stride, padding, dilation, groups);
  };
}

OpFn conv1d_with(int64_t stride = 1, ConvPadding<1> padding = 0, int64_t dilation = 1,
                 int64_t groups = 1) {
  return [=](const std::vector<Tensor>& v) {
    return conv1d(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), stride, padding, dilation, groups);
  };
}

std::vector<Sample> conv2d_samples(Conv2dFn f) {
  return {
      sample("(2, 2, 5, 5) * (3, 2, 3, 3)", {arg({2, 2, 5, 5}), arg({3, 2, 3, 3}), arg({3})},
             conv2d_with(f)),
      sample("stride 2, padding 1", {arg({1, 2, 5, 4}), arg({2, 2, 3, 3}), arg({2})},
             conv2d_with(f, 2, 1)),
      sample("stride (1, 2), padding (2, 0)", {arg({1, 1, 4, 6}), arg({2, 1, 2, 3}), arg({2})},
             conv2d_with(f, {1, 2}, {2, 0})),
      sample("dilation 2, padding 2", {arg({1, 2, 6, 5}), arg({2, 2, 3, 3}), arg({2})},
             conv2d_with(f, 1, 2, 2)),
      sample("dilation (2, 1), stride (2, 1), padding (0, 1)",
             {arg({2, 1, 7, 4}), arg({3, 1, 2, 3}), arg({3})},
             conv2d_with(f, {2, 1}, {0, 1}, {2, 1})),
      sample("groups 2: (1, 4, 5, 5) * (6, 2, 3, 3)",
             {arg({1, 4, 5, 5}), arg({6, 2, 3, 3}), arg({6})}, conv2d_with(f, 1, 1, 1, 2)),
      sample("depthwise, 2 outputs per channel, stride 2",
             {arg({2, 3, 5, 5}), arg({6, 1, 3, 3}), arg({6})}, conv2d_with(f, 2, 1, 1, 3)),
      sample("padding same, even kernel 2x4 (the odd total at the end)",
             {arg({1, 2, 4, 5}), arg({2, 2, 2, 4}), arg({2})}, conv2d_with(f, 1, "same")),
      sample("padding same, dilation 2", {arg({1, 2, 5, 5}), arg({2, 2, 2, 3}), arg({2})},
             conv2d_with(f, 1, "same", 2)),
      sample("padding valid", {arg({1, 2, 4, 4}), arg({2, 2, 3, 2}), arg({2})},
             conv2d_with(f, 1, "valid")),
      sample("no bias", {arg({1, 2, 4, 4}), arg({2, 2, 2, 2})}, conv2d_with(f)),
      sample("1x1 kernel", {arg({2, 3, 2, 2}), arg({4, 3, 1, 1}), arg({4})}, conv2d_with(f)),
      sample("kernel = image", {arg({2, 2, 3, 3}), arg({3, 2, 3, 3}), arg({3})}, conv2d_with(f)),
      sample("unbatched (C, H, W)", {arg({2, 4, 4}), arg({3, 2, 3, 3}), arg({3})},
             conv2d_with(f, 1, 1)),
      sample("transposed x, strided weight",
             {transposed({1, 2, 5, 4}), strided({2, 2, 2, 2}), arg({2})}, conv2d_with(f)),
      sample("expanded bias and weight",
             {arg({1, 2, 4, 4}), expanded({1, 2, 2, 2}, {3, 2, 2, 2}), expanded({1}, {3})},
             conv2d_with(f, 1, 1)),
      sample("batch 0", {arg({0, 2, 4, 4}), arg({3, 2, 2, 2}), arg({3})}, conv2d_with(f)),
      sample("batch 0, groups 2, stride 2", {arg({0, 4, 5, 5}), arg({2, 2, 3, 3}), arg({2})},
             conv2d_with(f, 2, 1, 1, 2)),
      large(sample("large |x| <= 1e4", {arg({1, 1, 3, 3}, kLarge), arg({2, 1, 2, 2}), arg({2})},
                   conv2d_with(f))),
      big(sample("big (4, 8, 32, 32) * (16, 8, 3, 3)",
                 {arg({4, 8, 32, 32}), arg({16, 8, 3, 3}), arg({16})}, conv2d_with(f, 1, 1))),
      big(sample("big depthwise (4, 16, 32, 32), stride 2, dilation 2",
                 {arg({4, 16, 32, 32}), arg({16, 1, 3, 3}), arg({16})},
                 conv2d_with(f, 2, 2, 2, 16))),
  };
}

std::vector<ErrorInput> conv2d_errors(Conv2dFn f, const std::string& name) {
  return {
      expect<ShapeError>(
          "channels 2 vs 3",
          [f] {
            f(ones({1, 2, 4, 4}), ones({1, 3, 2, 2}), {}, 1, 0, 1, 1);
          },
          name),
      expect<ShapeError>(
          "bias (2) for 1 output",
          [f] {
            f(ones({1, 2, 4, 4}), ones({1, 2, 2, 2}), ones({2}), 1, 0, 1, 1);
          },
          name),
      expect<DTypeError>(
          "float64 weight",
          [f] {
            f(ones({1, 2, 4, 4}), ones({1, 2, 2, 2}, kFloat64), {}, 1, 0, 1, 1);
          },
          name),
      expect<ShapeError>(
          "kernel larger than image",
          [f] {
            f(ones({1, 1, 2, 2}), ones({1, 1, 3, 3}), {}, 1, 0, 1, 1);
          },
          name),
      expect<ShapeError>(
          "dilation 2 spans 5 > image 4",
          [f] {
            f(ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {}, 1, 0, 2, 1);
          },
          name),
      expect<ShapeError>(
          "2-D input",
          [f] {
            f(ones({4, 4}), ones({1, 1, 3, 3}), {}, 1, 0, 1, 1);
          },
          name),
      expect<ValueError>(
          "stride 0",
          [f] {
            f(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 0, 0, 1, 1);
          },
          name),
      expect<ValueError>(
          "negative padding",
          [f] {
            f(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 1, {-1, 0}, 1, 1);
          },
          name),
      expect<ValueError>(
          "groups 0",
          [f] {
            f(ones({1, 2, 4, 4}), ones({2, 2, 2, 2}), {}, 1, 0, 1, 0);
          },
          name),
      expect<ShapeError>(
          "groups 2 for 3 outputs",
          [f] {
            f(ones({1, 4, 4, 4}), ones({3, 2, 2, 2}), {}, 1, 0, 1, 2);
          },
          name),
      expect<ValueError>(
          "padding same with stride 2",
          [f] {
            f(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 2, "same", 1, 1);
          },
          name),
      expect<ValueError>(
          "padding \"full\"",
          [f] {
            f(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, 1, "full", 1, 1);
          },
          name),
      expect<DTypeError>(
          "int64",
          [f] {
            f(zeros({1, 1, 2, 2}, kInt64), zeros({1, 1, 1, 1}, kInt64), {}, 1, 0, 1, 1);
          },
          name),
  };
}

std::vector<Sample> conv1d_samples() {
  return {
      sample("(2, 3, 7) * (4, 3, 3)", {arg({2, 3, 7}), arg({4, 3, 3}), arg({4})}, conv1d_with()),
      sample("stride 2, padding 1", {arg({1, 2, 8}), arg({3, 2, 3}), arg({3})}, conv1d_with(2, 1)),
      sample("dilation 3, padding 2", {arg({1, 2, 9}), arg({2, 2, 3}), arg({2})},
             conv1d_with(1, 2, 3)),
      sample("groups 2", {arg({2, 4, 6}), arg({4, 2, 2}), arg({4})}, conv1d_with(1, 0, 1, 2)),
      sample("depthwise, stride 3", {arg({1, 3, 10}), arg({3, 1, 4}), arg({3})},
             conv1d_with(3, 1, 1, 3)),
      sample("padding same, even kernel 4", {arg({1, 2, 6}), arg({2, 2, 4}), arg({2})},
             conv1d_with(1, "same")),
      sample("padding same, dilation 2", {arg({1, 2, 6}), arg({2, 2, 3}), arg({2})},
             conv1d_with(1, "same", 2)),
      sample("padding valid", {arg({1, 2, 5}), arg({2, 2, 3}), arg({2})}, conv1d_with(1, "valid")),
      sample("no bias", {arg({2, 2, 5}), arg({3, 2, 2})}, conv1d_with()),
      sample("kernel = length", {arg({2, 2, 4}), arg({3, 2, 4}), arg({3})}, conv1d_with()),
      sample("unbatched (C, L)", {arg({2, 6}), arg({3, 2, 3}), arg({3})}, conv1d_with(1, 1)),
      sample("transposed x, strided weight, expanded bias",
             {transposed({2, 3, 6}), strided({2, 3, 2}), expanded({1}, {2})}, conv1d_with()),
      sample("batch 0", {arg({0, 2, 5}), arg({3, 2, 2}), arg({3})}, conv1d_with()),
      large(sample("large |x| <= 1e4", {arg({1, 1, 5}, kLarge), arg({2, 1, 2}), arg({2})},
                   conv1d_with())),
      big(sample("big (8, 16, 512) * (16, 16, 5)", {arg({8, 16, 512}), arg({16, 16, 5}), arg({16})},
                 conv1d_with(1, 2))),
  };
}

std::vector<ErrorInput> conv1d_errors() {
  return {
      expect<ShapeError>("channels 2 vs 3",
                         [] {
                           conv1d(ones({1, 2, 5}), ones({1, 3, 2}));
                         }),
      expect<ShapeError>("4-D input",
                         [] {
                           conv1d(ones({1, 2, 5, 5}), ones({1, 2, 2}));
                         }),
      expect<ShapeError>("bias (2) for 1 output",
                         [] {
                           conv1d(ones({1, 2, 5}), ones({1, 2, 2}), ones({2}));
                         }),
      expect<ShapeError>("kernel 6 > length 5",
                         [] {
                           conv1d(ones({1, 1, 5}), ones({1, 1, 6}));
                         }),
      expect<ValueError>("dilation 0",
                         [] {
                           conv1d(ones({1, 1, 5}), ones({1, 1, 2}), {}, 1, 0, 0);
                         }),
      expect<ValueError>("groups -1",
                         [] {
                           conv1d(ones({1, 2, 5}), ones({2, 2, 2}), {}, 1, 0, 1, -1);
                         }),
      expect<ShapeError>("groups 2 for 3 input channels",
                         [] {
                           conv1d(ones({1, 3, 5}), ones({2, 1, 2}), {}, 1, 0, 1, 2);
                         }),
      expect<ValueError>("padding same with stride 2",
                         [] {
                           conv1d(ones({1, 1, 5}), ones({1, 1, 2}), {}, 2, "same");
                         }),
      expect<ValueError>("padding \"half\"",
                         [] {
                           conv1d(ones({1, 1, 5}), ones({1, 1, 2}), {}, 1, "half");
                         }),
      expect<DTypeError>("float64 bias",
                         [] {
                           conv1d(ones({1, 1, 5}), ones({1, 1, 2}), ones({1}, kFloat64));
                         }),
  };
}

}  // namespace

// The weight gradient sums batch x positions products per element in GEMMs over per-thread
// blocks, which 2 threads sum in another order: within ~1000 eps.
const Tolerance split_gemm{1e-4, 1e-5};
const std::string split_note =
    "weight gradient summed per thread: 1 vs 2 threads agree within ~1000 eps (float32)";

std::vector<OpInfo> conv_ops() {
  std::vector<OpInfo> t;
  t.push_back({.name = "conv2d",
               .samples = [] { return conv2d_samples(conv2d); },
               .errors = [] { return conv2d_errors(conv2d, "conv2d"); },
               .threads = split_gemm,
               .note = split_note});
  t.push_back({.name = "conv2d_composite",
               .samples = [] { return without_big(conv2d_samples(conv2d_composite)); },
               .errors = [] { return conv2d_errors(conv2d_composite, "conv2d_composite"); },
               .threads = split_gemm,
               .layouts = kGemmLayouts,
               .note = "matmul's GEMMs split per thread: " + split_note + "; " + kGemmLayoutsNote});
  t.push_back({.name = "conv1d",
               .samples = conv1d_samples,
               .errors = conv1d_errors,
               .threads = split_gemm,
               .note = split_note});
  return t;
}

}  // namespace nabla::op_db
