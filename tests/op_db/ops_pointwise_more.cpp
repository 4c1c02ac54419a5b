// op_db entries: the activations of ops/activation_more.h, the rounding and remainder ops of
// ops/rounding.h, and lerp and atan2 (ops/interpolation.h; clamp's tensor bounds are samples of
// the clamp entry in ops_binary.cpp). Kinks and poles are forward-only samples.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

std::vector<Sample> tagged(std::vector<Sample> s, const std::string& tag) {
  for (Sample& x : s) x.name = tag + x.name;
  return s;
}

// A float-only elementwise op with arguments bound: int64 and bool are DTypeErrors naming it.
OpInfo activation(const std::string& name, const OpFn& fn, Dist d, bool large,
                  std::vector<Sample> (*extra)(const OpFn&),
                  std::vector<ErrorInput> more_errors = {}) {
  OpInfo op;
  op.name = name;
  op.samples = [fn, d, large, extra] {
    auto s = unary_samples(fn, d, large);
    if (extra) append(s, extra(fn));
    return s;
  };
  op.errors = [fn, more_errors] {
    std::vector<ErrorInput> e = {
        expect<DTypeError>("int64 input", [fn] { fn({arange(3)}); }),
        expect<DTypeError>("bool input", [fn] { fn({ones({2}, kBool)}); }),
    };
    for (const ErrorInput& m : more_errors) e.push_back(m);
    return e;
  };
  return op;
}

OpInfo rounding(const std::string& name, Tensor (*f)(const Tensor&)) {
  OpInfo op;
  op.name = name;
  op.dtypes = {kFloat32, kFloat64, kInt64};
  op.samples = [f] {
    OpFn fn = unary_fn(f);
    // |x| up to 1e4 would put float32's spacing near 1e-3, the step that could cross an integer.
    auto s = unary_samples(fn, {-3, 3}, false);
    s.push_back(edge(
        "integers, halves, -0, +-inf, nan",
        {-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3, -3, INFINITY, -INFINITY, std::nan("")}, fn));
    return s;
  };
  op.errors = [f] {
    return std::vector<ErrorInput>{expect<DTypeError>("bool input", [f] { f(ones({2}, kBool)); })};
  };
  return op;
}

using ModFn = Tensor (*)(const Tensor&, const Tensor&);
using ModScalarFn = Tensor (*)(const Tensor&, double);
OpInfo modulo(const std::string& name, ModFn f, ModScalarFn fs) {
  OpInfo op;
  op.name = name;
  op.samples = [f, fs] {
    OpFn fn = binary_fn(f);
    OpFn scalar = [fs](const std::vector<Tensor>& v) { return fs(v[0], -1.5); };
    // No 1e4 magnitudes: a step of 1e-3 in b would cross the jumps of a / b.
    auto s = binary_samples(fn, {-3, 3}, kPositive, false);
    append(
        s,
        {sample("negative divisor (2, 3)", {arg({2, 3}, {-3, 3}), arg({2, 3}, {-3, -0.2})}, fn),
         sample("tensor op -1.5 (2, 3)", {arg({2, 3}, {-3, 3})}, scalar),
         sample("transposed (3, 4) op -1.5", {transposed({3, 4}, {-3, 3})}, scalar),
         edge("signs: +-3 by +-2, 0, x by 0 -> nan, inf", {3, -3, 3, -3, 0, 1, INFINITY},
              [f](const std::vector<Tensor>& v) {
                return f(v[0], from_vector<double>({2, 2, -2, -2, 2, 0, 2}, {7}).to(v[0].dtype()));
              })});
    return s;
  };
  op.errors = [f] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("shapes (2, 3) and (4)",
                           [f] {
                             f(ones({2, 3}), ones({4}));
                           }),
        expect<DTypeError>("float32 and float64", [f] { f(ones({2}), ones({2}, kFloat64)); }),
        expect<DTypeError>("int64 operands", [f] { f(arange(3), arange(3)); }),
    };
  };
  return op;
}

}  // namespace

std::vector<OpInfo> pointwise_more_ops() {
  std::vector<OpInfo> t;
  t.push_back(activation(
      "softplus", [](const std::vector<Tensor>& v) { return softplus(v[0]); }, {-4, 4}, true,
      [](const OpFn& fn) {
        OpFn beta2 = [](const std::vector<Tensor>& v) { return softplus(v[0], 2.0, 5.0); };
        OpFn neg = [](const std::vector<Tensor>& v) { return softplus(v[0], -0.5); };
        return std::vector<Sample>{
            at("saturation +-40, +-1e4", {-1e4, -40, 0, 40, 1e4}, fn),
            sample("beta 2, threshold 5 (3, 4)", {arg({3, 4}, {-4, 4})}, beta2),
            sample("beta -0.5 (2, 3)", {arg({2, 3}, {-4, 4})}, neg),
            edge("threshold crossing at beta x = 5", {2.4999, 2.5, 2.5001}, beta2),
            edge("-inf, inf", {-INFINITY, INFINITY}, fn)};
      },
      {expect<ValueError>("beta 0", [] { softplus(ones({2}), 0.0); }),
       expect<ValueError>("beta nan", [] { softplus(ones({2}), std::nan("")); })}));
  t.push_back(activation(
      "leaky_relu", [](const std::vector<Tensor>& v) { return leaky_relu(v[0], 0.2); }, {}, true,
      [](const OpFn& fn) {
        OpFn dflt = [](const std::vector<Tensor>& v) { return leaky_relu(v[0]); };
        return std::vector<Sample>{sample("default slope 0.01 (3, 4)", {arg({3, 4})}, dflt),
                                   edge("kink at 0 (gradient slope)", {0, -0.0, -1, 1}, fn)};
      },
      {expect<ValueError>("slope inf", [] { leaky_relu(ones({2}), INFINITY); })}));
  t.push_back(activation(
      "elu", [](const std::vector<Tensor>& v) { return elu(v[0], 1.5); }, {-3, 3}, true,
      [](const OpFn& fn) {
        OpFn dflt = [](const std::vector<Tensor>& v) { return elu(v[0]); };
        return std::vector<Sample>{sample("alpha 1 (3, 4)", {arg({3, 4}, {-3, 3})}, dflt),
                                   at("saturation -40, -1e4", {-1e4, -40, 40}, fn),
                                   edge("kink at 0 (gradient alpha)", {0, -0.0}, fn)};
      },
      {expect<ValueError>("alpha nan", [] { elu(ones({2}), std::nan("")); })}));
  t.push_back(activation("mish", unary_fn(mish), {-4, 4}, true, [](const OpFn& fn) {
    return std::vector<Sample>{at("saturation +-40, +-1e4", {-1e4, -40, 0, 40, 1e4}, fn)};
  }));
  t.push_back(activation(
      "hardtanh", [](const std::vector<Tensor>& v) { return hardtanh(v[0]); }, {-3, 3}, true,
      [](const OpFn& fn) {
        OpFn wide = [](const std::vector<Tensor>& v) { return hardtanh(v[0], -0.5, 2.0); };
        return std::vector<Sample>{
            sample("[-0.5, 2] (3, 4)", {arg({3, 4}, {-3, 3})}, wide),
            edge("on the bounds (no gradient), nan", {-1, 1, std::nan("")}, fn)};
      },
      {expect<ValueError>("min_val > max_val", [] { hardtanh(ones({2}), 1.0, -1.0); })}));
  t.push_back(activation("log_sigmoid", unary_fn(log_sigmoid), {-4, 4}, true, [](const OpFn& fn) {
    return std::vector<Sample>{at("saturation +-40, +-1e4", {-1e4, -40, 0, 40, 1e4}, fn)};
  }));
  t.push_back(activation("log1p", unary_fn(log1p), {-0.8, 3}, false, [](const OpFn& fn) {
    return std::vector<Sample>{
        at("tiny: +-1e-10, 1e-20 (1 + x rounds to 1)", {-1e-10, 1e-10, 1e-20}, fn),
        sample("large up to 1e4 (4, 3)", {arg({4, 3}, {1, 1e4})}, fn),
        edge("-1 -> -inf, -2 -> nan, inf", {-1, -2, INFINITY}, fn)};
  }));
  t.push_back(activation("expm1", unary_fn(expm1), {-3, 3}, false, [](const OpFn& fn) {
    return std::vector<Sample>{at("tiny: +-1e-10, 1e-20", {-1e-10, 1e-10, 1e-20}, fn),
                               at("large negative: -1e4, -80", {-1e4, -80}, fn),
                               edge("-inf -> -1, inf", {-INFINITY, INFINITY}, fn)};
  }));
  t.push_back(rounding("floor", floor));
  t.push_back(rounding("ceil", ceil));
  t.push_back(rounding("round", round));
  t.push_back(modulo("fmod", fmod, fmod));
  t.push_back(modulo("remainder", remainder, remainder));
  t.push_back({
      .name = "atan2",
      .samples =
          [] {
            OpFn fn = binary_fn(atan2);
            auto s = binary_samples(fn, {}, {}, false);
            s.push_back(edge(
                "quadrants and zeros: (+-0, +-0), (1, -inf)", {0, -0.0, 0, -0.0, 1},
                [](const std::vector<Tensor>& v) {
                  return atan2(
                      v[0],
                      from_vector<double>({0, 0, -0.0, -0.0, -INFINITY}, {5}).to(v[0].dtype()));
                }));
            return s;
          },
      .errors =
          [] {
            return std::vector{expect<ShapeError>("shapes (2, 3) and (4)",
                                                  [] {
                                                    atan2(ones({2, 3}), ones({4}));
                                                  }),
                               expect<DTypeError>("int64", [] { atan2(arange(2), arange(2)); })};
          },
  });
  t.push_back({
      .name = "lerp",
      .samples =
          [] {
            OpFn fn = [](const std::vector<Tensor>& v) { return lerp(v[0], v[1], v[2]); };
            OpFn scalar = [](const std::vector<Tensor>& v) { return lerp(v[0], v[1], 0.3); };
            OpFn scalar_hi = [](const std::vector<Tensor>& v) { return lerp(v[0], v[1], 0.8); };
            const Dist w{-0.5, 1.5};  // both of PyTorch's branches, and extrapolation
            std::vector<Sample> s = tagged(binary_samples(scalar, {}, {}, true), "w 0.3: ");
            append(s, {
                          sample("w 0.8 (2, 3)", {arg({2, 3}), arg({2, 3})}, scalar_hi),
                          sample("tensor w (2, 3)", {arg({2, 3}), arg({2, 3}), arg({2, 3}, w)}, fn),
                          sample("tensor w 0-d", {arg({}), arg({}), arg({}, w)}, fn),
                          sample("tensor w size-1 (1, 3)",
                                 {arg({1, 3}), arg({1, 3}), arg({1, 3}, w)}, fn),
                          sample("tensor w size-0 (0, 3)",
                                 {arg({0, 3}), arg({0, 3}), arg({0, 3}, w)}, fn),
                          sample("broadcast (3, 1), (4), (2, 1, 1)",
                                 {arg({3, 1}), arg({4}), arg({2, 1, 1}, w)}, fn),
                          sample("transposed, strided, expanded",
                                 {transposed({3, 4}), strided({3, 4}), expanded({3, 1}, {3, 4}, w)},
                                 fn),
                          big(sample("big (264, 512), (512), (264, 1)",
                                     {arg({264, 512}), arg({512}), arg({264, 1}, w)}, fn)),
                          edge("w exactly 0 and 1 give start and end", {0, 1},
                               [](const std::vector<Tensor>& v) {
                                 return lerp(full({2}, 3.25, v[0].dtype()),
                                             full({2}, -7.5, v[0].dtype()), v[0]);
                               }),
                      });
            return s;
          },
      .errors =
          [] {
            return std::vector{
                expect<ShapeError>("start (2, 3), end (4)",
                                   [] {
                                     lerp(ones({2, 3}), ones({4}), 0.5);
                                   }),
                expect<ShapeError>("weight (5) with (2, 3)",
                                   [] {
                                     lerp(ones({2, 3}), ones({2, 3}), ones({5}));
                                   }),
                expect<DTypeError>("float64 weight, float32 start",
                                   [] { lerp(ones({2}), ones({2}), ones({2}, kFloat64)); }),
                expect<DTypeError>("int64", [] { lerp(arange(2), arange(2), 0.5); })};
          },
  });
  return t;
}

}  // namespace nabla::op_db
