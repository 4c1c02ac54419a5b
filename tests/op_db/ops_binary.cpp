// op_db entries: arithmetic (ops/arithmetic.h, with the scalar overloads and the in-place forms)
// and the selecting ops of ops/pointwise.h (clamp, maximum, minimum, where, masked_fill).
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using ScalarFn = Tensor (*)(const Tensor&, double);
using ScalarFirstFn = Tensor (*)(double, const Tensor&);

// The errors every broadcasting binary op shares.
std::vector<ErrorInput> binary_errors(BinaryFn f) {
  return {
      expect<ShapeError>("shapes (2, 3) and (4)",
                         [f] {
                           f(ones({2, 3}), ones({4}));
                         }),
      expect<DTypeError>("float32 and float64", [f] { f(ones({2}), ones({2}, kFloat64)); }),
      expect<DTypeError>("bool operands", [f] { f(ones({2}, kBool), ones({2}, kBool)); }),
  };
}

// add/sub/mul/div: tensor-tensor samples, then the tensor-double and double-tensor overloads.
OpInfo arithmetic(const std::string& name, BinaryFn tt, ScalarFn ts, ScalarFirstFn st, Dist b) {
  OpInfo op;
  op.name = name;
  op.dtypes = {kFloat32, kFloat64, kInt64};
  op.samples = [tt, ts, st, b] {
    OpFn fn = [tt](const std::vector<Tensor>& v) { return tt(v[0], v[1]); };
    OpFn scalar = [ts](const std::vector<Tensor>& v) { return ts(v[0], -2.0); };
    OpFn first = [st](const std::vector<Tensor>& v) { return st(-2.0, v[0]); };
    auto s = binary_samples(fn, {}, b, true);
    append(s, {sample("tensor op -2.0 (2, 3)", {arg({2, 3})}, scalar),
               sample("0-d op -2.0", {arg({})}, scalar),
               sample("size-0 (0, 2) op -2.0", {arg({0, 2})}, scalar),
               sample("transposed (3, 4) op -2.0", {transposed({3, 4})}, scalar),
               sample("-2.0 op tensor (2, 3)", {arg({2, 3}, b)}, first),
               sample("-2.0 op 0-d", {arg({}, b)}, first),
               sample("-2.0 op size-0 (0, 2)", {arg({0, 2}, b)}, first),
               sample("-2.0 op transposed (3, 4)", {transposed({3, 4}, b)}, first)});
    return s;
  };
  op.errors = [tt, ts, st] {
    auto e = binary_errors(tt);
    e.push_back(expect<DTypeError>("int64 tensor op 0.5 (would truncate the scalar)",
                                   [ts] { ts(arange(3), 0.5); }));
    e.push_back(expect<DTypeError>("0.5 op int64 tensor", [st] { st(0.5, arange(3)); }));
    return e;
  };
  return op;
}

// In-place forms on a non-leaf copy (a leaf that requires grad is refused under grad mode).
using InplaceFn = Tensor& (*)(Tensor&, const Tensor&);
using InplaceScalarFn = Tensor& (*)(Tensor&, double);
OpInfo inplace(const std::string& name, InplaceFn f, Dist b, InplaceScalarFn fs = nullptr) {
  OpInfo op;
  op.name = name;
  op.dtypes = {kFloat32, kFloat64, kInt64};
  op.samples = [f, b, fs] {
    OpFn fn = [f](const std::vector<Tensor>& v) {
      Tensor self = v[0].clone();
      f(self, v[1]);
      return self;
    };
    std::vector<Sample> s = {
        sample("same shape (2, 3)", {arg({2, 3}), arg({2, 3}, b)}, fn),
        sample("broadcast other (2, 3) x (3)", {arg({2, 3}), arg({3}, b)}, fn),
        sample("broadcast other (2, 3, 4) x (3, 1)", {arg({2, 3, 4}), arg({3, 1}, b)}, fn),
        sample("0-d x 0-d", {arg({}), arg({}, b)}, fn),
        sample("(2, 3) x 0-d", {arg({2, 3}), arg({}, b)}, fn),
        sample("size-0 (0, 3) x (3)", {arg({0, 3}), arg({3}, b)}, fn),
        sample("transposed self, strided other", {transposed({3, 4}), strided({3, 4}, b)}, fn),
        sample("expanded other (3, 1) -> (3, 4)", {arg({3, 4}), expanded({3, 1}, {3, 4}, b)}, fn),
        sample("4-D (2, 1, 3, 2) x (1, 3, 2)", {arg({2, 1, 3, 2}), arg({1, 3, 2}, b)}, fn),
        big(sample("big (264, 512) x (512)", {arg({264, 512}), arg({512}, b)}, fn)),
    };
    if (fs) {
      OpFn scalar = [fs](const std::vector<Tensor>& v) {
        Tensor self = v[0].clone();
        fs(self, -2.0);
        return self;
      };
      s.push_back(sample("self op= -2.0 (2, 3)", {arg({2, 3})}, scalar));
      s.push_back(sample("0-d op= -2.0", {arg({})}, scalar));
    }
    return s;
  };
  op.errors = [f] {
    return std::vector<ErrorInput>{
        expect<AutogradError>("leaf that requires grad",
                              [f] {
                                Tensor x = ones({2}).requires_grad_();
                                f(x, ones({2}));
                              }),
        expect<ShapeError>("other (2, 3) does not broadcast to self (3)",
                           [f] {
                             Tensor x = ones({3});
                             f(x, ones({2, 3}));
                           }),
        expect<DTypeError>("float32 self, float64 other",
                           [f] {
                             Tensor x = ones({2});
                             f(x, ones({2}, kFloat64));
                           }),
    };
  };
  return op;
}

Tensor& add_tt(Tensor& s, const Tensor& o) { return add_(s, o); }
Tensor& mul_tt(Tensor& s, const Tensor& o) { return mul_(s, o); }
Tensor& add_ts(Tensor& s, double o) { return add_(s, o); }
Tensor& mul_ts(Tensor& s, double o) { return mul_(s, o); }

}  // namespace

std::vector<OpInfo> binary_ops() {
  std::vector<OpInfo> t;
  t.push_back(arithmetic("add", add, add, add, {}));
  t.push_back(arithmetic("sub", sub, sub, sub, {}));
  t.push_back(arithmetic("mul", mul, mul, mul, {}));
  {
    OpInfo d = arithmetic("div", div, div, div, kPositive);
    d.dtypes = {kFloat32, kFloat64};  // int64 would truncate and trap on 0: refused
    auto base = d.samples;
    d.samples = [base] {
      auto s = base();
      OpFn fn = [](const std::vector<Tensor>& v) { return div(v[0], v[1]); };
      s.push_back(sample("negative divisor", {arg({2, 3}), arg({2, 3}, {-3, -0.2})}, fn));
      Sample z = forward_only(
          sample("edge: 1/0, -1/0, 0/0", {values({3}, {1, -1, 0}), values({3}, {0, 0, 0})}, fn));
      s.push_back(z);
      return s;
    };
    t.push_back(d);
  }
  t.push_back({
      .name = "neg",
      .samples = [] { return unary_samples(unary_fn(neg)); },
      .errors =
          [] { return std::vector{expect<DTypeError>("bool", [] { neg(ones({2}, kBool)); })}; },
      .dtypes = {kFloat32, kFloat64, kInt64},
  });
  {
    OpInfo p;
    p.name = "pow";
    p.samples = [] {
      std::vector<Sample> s;
      for (double e : {2.0, 3.0, 0.0, -1.0}) {
        auto u =
            unary_samples([e](const std::vector<Tensor>& v) { return pow(v[0], e); }, {}, e >= 0);
        append(s, e == 2.0 ? u : without_big(u));
      }
      for (double e : {0.5, -1.5, 2.5})
        append(s, {sample("positive (2, 3) ^ " + std::to_string(e), {arg({2, 3}, kPositive)},
                          [e](const std::vector<Tensor>& v) { return pow(v[0], e); })});
      s.push_back(forward_only(
          sample("edge: 0 ^ 0.5 (infinite slope), -1 ^ 0.5 -> nan", {values({2}, {0, -1})},
                 [](const std::vector<Tensor>& v) { return pow(v[0], 0.5); })));
      append(s, binary_samples([](const std::vector<Tensor>& v) { return pow(v[0], v[1]); },
                               kPositive, {}, false));
      for (double base : {2.0, 0.5})  // scalar base: grad_e = grad y ln(base)
        append(s,
               without_big(unary_samples(
                   [base](const std::vector<Tensor>& v) { return pow(base, v[0]); }, {}, false)));
      s.push_back(forward_only(sample(
          "edge: 0 ^ e for e = 2, 0, -1 (gradient 0 where e >= 0)", {values({3}, {2, 0, -1})},
          [](const std::vector<Tensor>& v) { return pow(0.0, v[0]); })));
      return s;
    };
    p.errors = [] {
      auto e = binary_errors([](const Tensor& a, const Tensor& b) { return pow(a, b); });
      e.push_back(expect<DTypeError>("int64 ^ 2.0", [] { pow(arange(3), 2.0); }));
      e.push_back(expect<DTypeError>("2.0 ^ int64", [] { pow(2.0, arange(3)); }));
      return e;
    };
    t.push_back(p);
  }
  t.push_back(inplace("add_", add_tt, {}, add_ts));
  t.push_back(inplace("sub_", sub_, {}));
  t.push_back(inplace("mul_", mul_tt, {}, mul_ts));
  t.push_back(inplace("div_", div_, kPositive));
  t.back().dtypes = {kFloat32, kFloat64};
  {
    OpInfo c;
    c.name = "clamp";
    c.dtypes = {kFloat32, kFloat64, kInt64};
    c.samples = [] {
      std::vector<Sample> s;
      struct Bounds {
        const char* tag;
        std::optional<double> lo, hi;
      };
      for (Bounds b : {Bounds{"[-1, 1] ", -1.0, 1.0}, Bounds{"[-0.5, ) ", -0.5, std::nullopt},
                       Bounds{"( , 0.5] ", std::nullopt, 0.5}, Bounds{"min > max ", 1.0, -1.0}}) {
        OpFn fn = [b](const std::vector<Tensor>& v) { return clamp(v[0], b.lo, b.hi); };
        const bool integral =
            (!b.lo || *b.lo == std::floor(*b.lo)) && (!b.hi || *b.hi == std::floor(*b.hi));
        auto u = unary_samples(fn, {-3, 3}, true);
        for (Sample& x : s.empty() ? u : without_big(u)) {
          x.name = b.tag + x.name;
          x.other_dtypes = integral;
          s.push_back(std::move(x));
        }
      }
      s.push_back(forward_only(
          sample("edge: on the bounds (gradient passes), nan", {values({3}, {-1, 1, std::nan("")})},
                 [](const std::vector<Tensor>& v) { return clamp(v[0], -1.0, 1.0); })));
      // Tensor bounds: x, min and max all differentiated, broadcast together.
      OpFn both = [](const std::vector<Tensor>& v) { return clamp(v[0], v[1], v[2]); };
      OpFn lo = [](const std::vector<Tensor>& v) { return clamp(v[0], v[1], Tensor()); };
      OpFn hi = [](const std::vector<Tensor>& v) { return clamp(v[0], Tensor(), v[1]); };
      const Dist x{-3, 3}, l{-2, -0.3}, h{0.3, 2};
      append(s,
             {
                 sample("tensors: same shape (3, 4)",
                        {arg({3, 4}, x), arg({3, 4}, l), arg({3, 4}, h)}, both),
                 sample("tensors: 0-d", {arg({}, x), arg({}, l), arg({}, h)}, both),
                 sample("tensors: size-0 (0, 3)", {arg({0, 3}, x), arg({3}, l), arg({3}, h)}, both),
                 sample("tensors: broadcast (3, 1), (4), (2, 1, 1)",
                        {arg({3, 1}, x), arg({4}, l), arg({2, 1, 1}, h)}, both),
                 sample("tensors: transposed, strided, expanded",
                        {transposed({3, 4}, x), strided({3, 4}, l), expanded({3, 1}, {3, 4}, h)},
                        both),
                 sample("tensors: min only (2, 3) (3)", {arg({2, 3}, x), arg({3}, l)}, lo),
                 sample("tensors: max only (2, 3) (2, 1)", {arg({2, 3}, x), arg({2, 1}, h)}, hi),
                 big(sample("tensors: big (264, 512)",
                            {arg({264, 512}, x), arg({512}, l), arg({512}, h)}, both)),
                 forward_only(sample("tensors: edge: min > max gives max, on the bounds, nan",
                                     {values({4}, {0, -1, 1, std::nan("")}),
                                      values({4}, {1, -1, -1, -1}), values({4}, {-1, 1, 1, 1})},
                                     both)),
             });
      return s;
    };
    c.errors = [] {
      return std::vector<ErrorInput>{
          expect<ValueError>("no bound", [] { clamp(ones({2}), std::nullopt, std::nullopt); }),
          expect<DTypeError>("int64 with bound 0.5", [] { clamp(arange(3), 0.5, std::nullopt); }),
          expect<DTypeError>("bool", [] { clamp(ones({2}, kBool), 0.0, 1.0); }),
          expect<ValueError>("no tensor bound", [] { clamp(ones({2}), Tensor(), Tensor()); }),
          expect<ShapeError>("tensor min (4) with (2, 3)",
                             [] {
                               clamp(ones({2, 3}), ones({4}), Tensor());
                             }),
          expect<DTypeError>("float64 max, float32 x",
                             [] { clamp(ones({2}), Tensor(), ones({2}, kFloat64)); }),
      };
    };
    t.push_back(c);
  }
  for (auto [name, f] : {std::pair<const char*, BinaryFn>{"maximum", maximum},
                         std::pair<const char*, BinaryFn>{"minimum", minimum}}) {
    OpInfo m;
    m.name = name;
    m.dtypes = {kFloat32, kFloat64, kInt64};
    m.samples = [f = f] {
      OpFn fn = [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); };
      auto s = binary_samples(fn, {}, {}, true);
      Sample ties = sample("ties (half the gradient each)",
                           {values({3}, {1, -2, 0.5}), values({3}, {1, -2, 0.5})}, fn);
      ties.gradgradcheck = false;  // the first derivative jumps at a tie
      s.push_back(ties);
      s.push_back(forward_only(
          sample("edge: nan propagates",
                 {values({2}, {std::nan(""), 1}), values({2}, {0, std::nan("")})}, fn)));
      return s;
    };
    m.errors = [f = f] { return binary_errors(f); };
    t.push_back(m);
  }
  {
    OpInfo w;
    w.name = "where";
    w.dtypes = {kFloat32, kFloat64, kInt64, kBool};
    w.samples = [] {
      OpFn fn = [](const std::vector<Tensor>& v) { return where(v[0], v[1], v[2]); };
      OpFn right = [](const std::vector<Tensor>& v) { return where(v[0], v[1], 0.0); };
      OpFn left = [](const std::vector<Tensor>& v) { return where(v[0], 1.0, v[1]); };
      return std::vector<Sample>{
          sample("same shape (2, 3)", {fixed(bool_mask({2, 3})), arg({2, 3}), arg({2, 3})}, fn),
          sample("broadcast cond (3, 1), a (1, 4), b 0-d",
                 {fixed(bool_mask({3, 1})), arg({1, 4}), arg({})}, fn),
          sample("0-d cond", {fixed(bool_mask({})), arg({2, 3}), arg({3})}, fn),
          sample("size-0", {fixed(bool_mask({0, 3})), arg({0, 3}), arg({3})}, fn),
          sample("transposed a, strided b",
                 {fixed(bool_mask({3, 4})), transposed({3, 4}), strided({3, 4})}, fn),
          sample("expanded a, 4-D",
                 {fixed(bool_mask({2, 1, 3, 4})), expanded({3, 1}, {3, 4}), arg({2, 1, 1, 4})}, fn),
          big(sample("big", {fixed(bool_mask({264, 512})), arg({264, 512}), arg({512})}, fn)),
          sample("where(cond, a, 0.0)", {fixed(bool_mask({2, 3})), arg({2, 3})}, right),
          sample("where(cond, 1.0, b)", {fixed(bool_mask({2, 3})), transposed({2, 3})}, left),
      };
    };
    w.errors = [] {
      return std::vector<ErrorInput>{
          expect<DTypeError>("float cond", [] { where(ones({2}), ones({2}), ones({2})); }),
          expect<ShapeError>("cond (2), a (3)",
                             [] { where(ones({2}, kBool), ones({3}), ones({3})); }),
          expect<DTypeError>("a float32, b float64",
                             [] { where(ones({2}, kBool), ones({2}), ones({2}, kFloat64)); }),
          expect<DTypeError>("int64 a with scalar 0.5 (would truncate)",
                             [] { where(ones({2}, kBool), arange(2), 0.5); }),
      };
    };
    t.push_back(w);
  }
  {
    OpInfo m;
    m.name = "masked_fill";
    m.dtypes = {kFloat32, kFloat64, kInt64, kBool};
    m.samples = [] {
      auto fill = [](double value) {
        return [value](const std::vector<Tensor>& v) { return masked_fill(v[0], v[1], value); };
      };
      return std::vector<Sample>{
          sample("same shape (2, 3)", {arg({2, 3}), fixed(bool_mask({2, 3}))}, fill(-1)),
          sample("broadcast mask (3, 1) on (3, 4)", {arg({3, 4}), fixed(bool_mask({3, 1}))},
                 fill(2)),
          sample("0-d mask on 0-d", {arg({}), fixed(bool_mask({}))}, fill(0)),
          sample("size-0", {arg({0, 3}), fixed(bool_mask({3}))}, fill(1)),
          sample("transposed x", {transposed({3, 4}), fixed(bool_mask({3, 4}))}, fill(1)),
          sample("expanded x, 4-D mask",
                 {expanded({3, 1}, {2, 1, 3, 4}), fixed(bool_mask({2, 1, 3, 4}))}, fill(1)),
          float_only(sample("fill -inf (attention masks)", {arg({2, 3}), fixed(bool_mask({2, 3}))},
                            fill(-INFINITY))),
          big(sample("big", {arg({264, 512}), fixed(bool_mask({512}))}, fill(0))),
      };
    };
    m.errors = [] {
      return std::vector<ErrorInput>{
          expect<DTypeError>("float mask", [] { masked_fill(ones({2}), ones({2}), 0); }),
          expect<ShapeError>("mask (2, 3) on (3)",
                             [] {
                               masked_fill(ones({3}), ones({2, 3}, kBool), 0);
                             }),
          expect<ValueError>("int64 with 0.5",
                             [] { masked_fill(arange(2), ones({2}, kBool), 0.5); }),
      };
    };
    t.push_back(m);
  }
  return t;
}

}  // namespace nabla::op_db
