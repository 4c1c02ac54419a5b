// op_db entries: pooling (ops/pool.h), max (also with indices), average and adaptive average, 1-D
// and 2-D: overlapping and skipping windows, padding, dilation, ceil_mode's partial last window,
// count_include_pad both ways, adaptive windows that overlap or repeat inputs, inputs without the
// batch dim, a batch of 0, and non-contiguous or expanded inputs. Random values have no ties, so
// each window's maximum is unique and max pooling is differentiable at the samples; ties are
// forward-only samples.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

// Every pooling op as one signature (2-D: kernel, stride, padding, dilation; 1-D uses [1]).
struct PoolArgs {
  Size2 kernel, stride = {}, padding = 0, dilation = 1;
  bool ceil_mode = false, count_include_pad = true;
};
using PoolFn = std::function<Tensor(const Tensor&, const PoolArgs&)>;

OpFn pool_with(const PoolFn& f, PoolArgs a) {
  return [f, a](const std::vector<Tensor>& v) { return f(v[0], a); };
}

std::optional<int64_t> stride1(const PoolArgs& a) {
  return a.stride.given ? std::optional<int64_t>(a.stride[1]) : std::nullopt;
}

PoolFn max2d = [](const Tensor& x, const PoolArgs& a) {
  return max_pool2d(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode);
};
PoolFn max2d_indices = [](const Tensor& x, const PoolArgs& a) {
  return max_pool2d_with_indices(x, a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode).output;
};
PoolFn max1d = [](const Tensor& x, const PoolArgs& a) {
  return max_pool1d(x, a.kernel[1], stride1(a), a.padding[1], a.dilation[1], a.ceil_mode);
};
PoolFn max1d_indices = [](const Tensor& x, const PoolArgs& a) {
  return max_pool1d_with_indices(x, a.kernel[1], stride1(a), a.padding[1], a.dilation[1],
                                 a.ceil_mode)
      .output;
};
PoolFn avg2d = [](const Tensor& x, const PoolArgs& a) {
  return avg_pool2d(x, a.kernel, a.stride, a.padding, a.ceil_mode, a.count_include_pad);
};
PoolFn avg1d = [](const Tensor& x, const PoolArgs& a) {
  return avg_pool1d(x, a.kernel[1], stride1(a), a.padding[1], a.ceil_mode, a.count_include_pad);
};

// Shapes the 2-D and 1-D variants share: (B, C, H, W) or (B, C, L).
Shape img(bool two_d, int64_t B, int64_t C, int64_t H, int64_t W) {
  return two_d ? Shape{B, C, H, W} : Shape{B, C, W};
}

// Samples every windowed pool takes; `dilated`: the op has a dilation argument (max pooling).
std::vector<Sample> window_samples(const PoolFn& f, bool two_d, bool dilated) {
  auto s = [&](PoolArgs a) { return pool_with(f, a); };
  const Shape unbatched = two_d ? Shape{2, 5, 5} : Shape{2, 5};
  std::vector<Sample> out = {
      sample("kernel 2", {arg(img(two_d, 2, 3, 4, 6))}, s({.kernel = 2})),
      sample("kernel 3, stride 2, padding 1 (overlapping)", {arg(img(two_d, 1, 2, 7, 7))},
             s({.kernel = 3, .stride = 2, .padding = 1})),
      sample("kernel (2, 3), stride (1, 2), padding (1, 1)", {arg(img(two_d, 1, 2, 4, 7))},
             s({.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}})),
      sample("stride 3 > kernel 2 skips inputs", {arg(img(two_d, 1, 2, 7, 8))},
             s({.kernel = 2, .stride = 3})),
      sample("ceil_mode: a partial last window", {arg(img(two_d, 1, 2, 5, 5))},
             s({.kernel = 2, .stride = 2, .ceil_mode = true})),
      sample("ceil_mode with padding 1", {arg(img(two_d, 1, 1, 6, 6))},
             s({.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true})),
      sample("kernel = input (global)", {arg(img(two_d, 2, 2, 3, 4))},
             s({.kernel = two_d ? Size2{3, 4} : Size2{4}})),
      sample("unbatched", {arg(unbatched)}, s({.kernel = 2, .stride = 1})),
      sample("transposed", {transposed(img(two_d, 1, 2, 5, 4))}, s({.kernel = 2, .stride = 1})),
      sample("strided", {strided(img(two_d, 2, 1, 4, 6))}, s({.kernel = 3, .stride = 2})),
      sample("expanded channels", {expanded(img(two_d, 1, 1, 4, 4), img(two_d, 2, 3, 4, 4))},
             s({.kernel = 2})),
      sample("batch 0", {arg(img(two_d, 0, 2, 4, 4))}, s({.kernel = 2})),
      sample("batch 0, ceil_mode", {arg(img(two_d, 0, 2, 5, 5))},
             s({.kernel = 2, .ceil_mode = true})),
      large(sample("large |x| <= 1e4", {arg(img(two_d, 1, 2, 4, 4), kLarge)},
                   s({.kernel = 2, .stride = 1}))),
      big(sample("big, kernel 3, stride 2, padding 1",
                 {arg(img(two_d, 8, 16, 32, two_d ? 32 : 1024))},
                 s({.kernel = 3, .stride = 2, .padding = 1}))),
  };
  if (dilated) {
    out.push_back(sample("dilation 2, padding 1", {arg(img(two_d, 1, 2, 7, 7))},
                         s({.kernel = 3, .stride = 1, .padding = 1, .dilation = 2})));
    out.push_back(sample("dilation 2, ceil_mode", {arg(img(two_d, 1, 1, 8, 8))},
                         s({.kernel = 2, .stride = 3, .dilation = 2, .ceil_mode = true})));
    out.push_back(forward_only(sample(
        "ties: the first maximum gets the gradient",
        {values(two_d ? Shape{1, 1, 2, 2} : Shape{1, 1, 4}, {1, 1, 1, 1})}, s({.kernel = 2}))));
  } else {
    out.push_back(sample("count_include_pad false, padding 1", {arg(img(two_d, 1, 2, 5, 5))},
                         s({.kernel = 3, .stride = 2, .padding = 1, .count_include_pad = false})));
    out.push_back(sample("ceil_mode, padding 1, count_include_pad false",
                         {arg(img(two_d, 1, 1, 6, 6))},
                         s({.kernel = 3,
                            .stride = 2,
                            .padding = 1,
                            .ceil_mode = true,
                            .count_include_pad = false})));
  }
  return out;
}

std::vector<ErrorInput> window_errors(const PoolFn& f, bool two_d, bool dilated) {
  const Shape x = img(two_d, 1, 1, 4, 4);
  auto bad = [f](Shape shape, PoolArgs a) { return [f, shape, a] { f(ones(shape), a); }; };
  std::vector<ErrorInput> e = {
      expect<ShapeError>("input of 1 dim too few",
                         bad(two_d ? Shape{4, 4} : Shape{4}, {.kernel = 2})),
      expect<ShapeError>("input of 1 dim too many",
                         bad(two_d ? Shape{1, 1, 1, 4, 4} : Shape{1, 1, 4, 4}, {.kernel = 2})),
      expect<ValueError>("kernel 0", bad(x, {.kernel = 0})),
      expect<ValueError>("stride -1", bad(x, {.kernel = 2, .stride = -1})),
      expect<ValueError>("negative padding", bad(x, {.kernel = 2, .padding = -1})),
      expect<ValueError>("padding 2 > kernel 3 / 2", bad(x, {.kernel = 3, .padding = 2})),
      expect<ShapeError>("kernel 5 > input 4", bad(x, {.kernel = 5})),
  };
  if (dilated) {
    e.push_back(expect<ValueError>("dilation 0", bad(x, {.kernel = 2, .dilation = 0})));
    e.push_back(
        expect<ShapeError>("dilation 2 spans 5 > input 4", bad(x, {.kernel = 3, .dilation = 2})));
  }
  return e;
}

OpFn adaptive2d(Size2 out) {
  return [out](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], out); };
}
OpFn adaptive1d(int64_t out) {
  return [out](const std::vector<Tensor>& v) { return adaptive_avg_pool1d(v[0], out); };
}

std::vector<Sample> adaptive2d_samples() {
  return {
      sample("6x6 to 3x3 (exact tiling)", {arg({2, 3, 6, 6})}, adaptive2d(3)),
      sample("5x7 to 3x4 (overlapping windows)", {arg({1, 2, 5, 7})}, adaptive2d({3, 4})),
      sample("to 1x1 (global mean)", {arg({2, 2, 3, 5})}, adaptive2d(1)),
      sample("3x2 to 5x4 (inputs repeated)", {arg({1, 2, 3, 2})}, adaptive2d({5, 4})),
      sample("output (0, 2)", {arg({1, 2, 3, 3})}, adaptive2d({0, 2})),
      sample("unbatched (C, H, W)", {arg({2, 5, 4})}, adaptive2d({2, 3})),
      sample("transposed", {transposed({1, 2, 5, 4})}, adaptive2d({2, 3})),
      sample("strided", {strided({1, 2, 4, 6})}, adaptive2d({3, 4})),
      sample("expanded channels", {expanded({1, 1, 4, 4}, {2, 3, 4, 4})}, adaptive2d(3)),
      sample("batch 0", {arg({0, 2, 4, 4})}, adaptive2d(2)),
      large(sample("large |x| <= 1e4", {arg({1, 2, 4, 4}, kLarge)}, adaptive2d(3))),
      big(sample("big (8, 16, 32, 32) to 7x7", {arg({8, 16, 32, 32})}, adaptive2d(7))),
  };
}

std::vector<Sample> adaptive1d_samples() {
  return {
      sample("6 to 3 (exact tiling)", {arg({2, 3, 6})}, adaptive1d(3)),
      sample("7 to 4 (overlapping windows)", {arg({1, 2, 7})}, adaptive1d(4)),
      sample("to 1 (global mean)", {arg({2, 2, 5})}, adaptive1d(1)),
      sample("3 to 5 (inputs repeated)", {arg({1, 2, 3})}, adaptive1d(5)),
      sample("output 0", {arg({1, 2, 3})}, adaptive1d(0)),
      sample("unbatched (C, L)", {arg({2, 5})}, adaptive1d(2)),
      sample("transposed", {transposed({1, 2, 5})}, adaptive1d(3)),
      sample("strided", {strided({2, 2, 6})}, adaptive1d(4)),
      sample("expanded channels", {expanded({1, 1, 6}, {2, 3, 6})}, adaptive1d(4)),
      sample("batch 0", {arg({0, 2, 4})}, adaptive1d(2)),
      big(sample("big (8, 16, 1024) to 10", {arg({8, 16, 1024})}, adaptive1d(10))),
  };
}

template <class F>
std::vector<ErrorInput> adaptive_errors(F f, Shape x, Shape too_few, Shape empty_spatial) {
  return {
      expect<ShapeError>("input of 1 dim too few", [=] { f(ones(too_few), 2); }),
      expect<ShapeError>("output_size -1", [=] { f(ones(x), -1); }),
      expect<ShapeError>("empty spatial dim", [=] { f(ones(empty_spatial), 2); }),
  };
}

OpInfo window_pool(const std::string& name, PoolFn f, bool two_d, bool dilated, bool with_big) {
  return {.name = name,
          .samples =
              [=] {
                std::vector<Sample> s = window_samples(f, two_d, dilated);
                return with_big ? s : without_big(s);
              },
          .errors = [=] { return window_errors(f, two_d, dilated); }};
}

}  // namespace

std::vector<OpInfo> pool_ops() {
  std::vector<OpInfo> t;
  t.push_back(window_pool("max_pool2d", max2d, true, true, true));
  // The same kernel as max_pool2d, returning the indices too: one big sample is enough.
  t.push_back(window_pool("max_pool2d_with_indices", max2d_indices, true, true, false));
  t.push_back(window_pool("max_pool1d", max1d, false, true, true));
  t.push_back(window_pool("max_pool1d_with_indices", max1d_indices, false, true, false));
  t.push_back(window_pool("avg_pool2d", avg2d, true, false, true));
  t.push_back(window_pool("avg_pool1d", avg1d, false, false, true));
  t.push_back({.name = "adaptive_avg_pool2d", .samples = adaptive2d_samples, .errors = [] {
                 return adaptive_errors(
                     [](const Tensor& x, int64_t o) { adaptive_avg_pool2d(x, o); }, {1, 1, 4, 4},
                     {4, 4}, {1, 1, 0, 4});
               }});
  t.push_back({.name = "adaptive_avg_pool1d", .samples = adaptive1d_samples, .errors = [] {
                 return adaptive_errors(
                     [](const Tensor& x, int64_t o) { adaptive_avg_pool1d(x, o); }, {1, 1, 4}, {4},
                     {1, 1, 0});
               }});
  return t;
}

}  // namespace nabla::op_db
