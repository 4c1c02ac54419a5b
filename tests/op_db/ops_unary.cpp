// op_db entries: elementwise functions of one tensor (ops/unary.h, the math of ops/pointwise.h,
// ops/activation.h). Each gets the standard unary samples inside its domain, values of magnitude
// 1e4 where the result is finite, and the edges of its domain (poles and kinks forward-only).
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using UnaryFn = Tensor (*)(const Tensor&);

std::vector<Sample> prefixed(std::vector<Sample> s, const std::string& prefix) {
  for (Sample& x : s) x.name = prefix + x.name;
  return s;
}

// A float-only elementwise op: bool and int64 inputs are DTypeErrors naming it.
OpInfo unary(const std::string& name, UnaryFn f, Dist d, bool large,
             std::function<std::vector<Sample>(const OpFn&)> extra = nullptr,
             bool takes_int64 = false) {
  OpInfo op;
  op.name = name;
  if (takes_int64) op.dtypes.push_back(kInt64);
  OpFn fn = [f](const std::vector<Tensor>& v) { return f(v[0]); };
  op.samples = [fn, d, large, extra] {
    auto s = unary_samples(fn, d, large);
    if (extra) append(s, extra(fn));
    return s;
  };
  op.errors = [f, takes_int64] {
    std::vector<ErrorInput> e = {expect<DTypeError>("bool input", [f] { f(ones({2}, kBool)); })};
    if (!takes_int64) e.push_back(expect<DTypeError>("int64 input", [f] { f(arange(3)); }));
    return e;
  };
  return op;
}

OpInfo gelu_entry(const std::string& name, Tensor (*f)(const Tensor&, GeluApproximate)) {
  OpInfo op;
  op.name = name;
  op.samples = [f] {
    std::vector<Sample> s;
    for (auto [a, tag] :
         {std::pair{GeluApproximate::None, "erf: "}, std::pair{GeluApproximate::Tanh, "tanh: "}}) {
      OpFn fn = [f, a = a](const std::vector<Tensor>& v) { return f(v[0], a); };
      auto u = unary_samples(fn, {-4, 4}, true);
      append(s, prefixed(a == GeluApproximate::None ? u : without_big(u), tag));
      s.push_back(prefixed({at("saturation +-10, +-40", {-40, -10, 0, 10, 40}, fn)}, tag)[0]);
    }
    return s;
  };
  op.errors = [f] {
    return std::vector<ErrorInput>{
        expect<DTypeError>("int64 input", [f] { f(arange(3), GeluApproximate::None); })};
  };
  return op;
}

}  // namespace

std::vector<OpInfo> unary_ops() {
  std::vector<OpInfo> t;
  t.push_back(unary("exp", exp, {-3, 3}, false, [](const OpFn& fn) {
    return std::vector<Sample>{at("large negative: -1e4, -745, -80", {-1e4, -745, -80, 0}, fn),
                               at("near float32's overflow: 88", {88}, fn), forward_only([&] {
                                 Sample s =
                                     edge("float64 only: 700 (float32 overflows)", {700}, fn);
                                 s.float32 = false;
                                 return s;
                               }())};
  }));
  t.push_back(unary("log", log, kPositive, false, [](const OpFn& fn) {
    return std::vector<Sample>{at("small and large: 1e-3, 1e4", {1e-3, 1e4}, fn),
                               sample("large up to 1e4 (4, 3)", {arg({4, 3}, {1, 1e4})}, fn),
                               edge("0 -> -inf, -1 -> nan, 1e-30", {0, -1, 1e-30}, fn)};
  }));
  t.push_back(unary("sqrt", sqrt, kPositive, false, [](const OpFn& fn) {
    return std::vector<Sample>{at("small and large: 1e-4, 1e4", {1e-4, 1e4}, fn),
                               sample("large up to 1e4 (4, 3)", {arg({4, 3}, {1, 1e4})}, fn),
                               edge("0 (infinite slope), -1 -> nan", {0, -1}, fn)};
  }));
  t.push_back(unary(
      "abs", abs, {}, true,
      [](const OpFn& fn) {
        return std::vector<Sample>{edge("kink at 0", {0, -0.0, 1}, fn)};
      },
      true));
  t.push_back(unary(
      "sign", sign, {}, true,
      [](const OpFn& fn) {
        return std::vector<Sample>{edge("0 and -0", {0, -0.0, 2}, fn)};
      },
      true));
  t.push_back(unary("tanh", tanh, {}, true, [](const OpFn& fn) {
    return std::vector<Sample>{at("saturation +-20, +-1e4", {-1e4, -20, 0, 20, 1e4}, fn)};
  }));
  t.push_back(unary("sigmoid", sigmoid, {-4, 4}, true, [](const OpFn& fn) {
    return std::vector<Sample>{at("saturation +-40, +-1e4", {-1e4, -40, 0, 40, 1e4}, fn)};
  }));
  t.push_back(unary(
      "relu", relu, {}, true,
      [](const OpFn& fn) {
        return std::vector<Sample>{edge("kink at 0", {0, -0.0, -1, 1}, fn)};
      },
      true));
  t.push_back(unary("sin", sin, {-4, 4}, true));
  t.push_back(unary("cos", cos, {-4, 4}, true));
  t.push_back(unary("rsqrt", rsqrt, kPositive, false, [](const OpFn& fn) {
    return std::vector<Sample>{at("small and large: 1e-4, 1e4", {1e-4, 1e4}, fn),
                               edge("0 -> inf, -1 -> nan", {0, -1}, fn)};
  }));
  t.push_back(unary("reciprocal", reciprocal, kPositive, false, [](const OpFn& fn) {
    return std::vector<Sample>{
        sample("negative (2, 3)", {arg({2, 3}, {-3, -0.2})}, fn),
        at("small and large: -1e-3, 1e-3, +-1e4", {-1e4, -1e-3, 1e-3, 1e4}, fn),
        edge("0 -> inf, -0 -> -inf", {0, -0.0}, fn)};
  }));
  t.push_back(unary("square", square, {}, true, nullptr, true));
  t.push_back(unary("erf", erf, {}, true, [](const OpFn& fn) {
    return std::vector<Sample>{at("saturation +-6, +-1e4", {-1e4, -6, 0, 6, 1e4}, fn)};
  }));
  t.push_back(unary("silu", silu, {-4, 4}, true, [](const OpFn& fn) {
    return std::vector<Sample>{at("saturation +-40, +-1e4", {-1e4, -40, 0, 40, 1e4}, fn)};
  }));
  t.push_back(gelu_entry("gelu", gelu));
  t.push_back(gelu_entry("gelu_composite", gelu_composite));
  {
    OpInfo gb;
    gb.name = "gelu_backward";
    gb.samples = [] {
      std::vector<Sample> s;
      for (auto [a, tag] : {std::pair{GeluApproximate::None, "erf: "},
                            std::pair{GeluApproximate::Tanh, "tanh: "}}) {
        OpFn fn = [a = a](const std::vector<Tensor>& v) { return gelu_backward(v[0], v[1], a); };
        auto b = binary_samples(fn, {}, {-4, 4}, true);
        append(s, prefixed(a == GeluApproximate::None ? b : without_big(b), tag));
      }
      return s;
    };
    gb.errors = [] {
      return std::vector<ErrorInput>{
          expect<ShapeError>("shapes (2, 3) and (4)",
                             [] {
                               gelu_backward(ones({2, 3}), ones({4}));
                             }),
          expect<DTypeError>("float32 grad, float64 x",
                             [] { gelu_backward(ones({2}), ones({2}, kFloat64)); }),
          expect<DTypeError>("int64", [] { gelu_backward(arange(2), arange(2)); }),
      };
    };
    t.push_back(gb);
  }
  return t;
}

}  // namespace nabla::op_db
