// op_db entries: the losses of ops/loss.h and their composite twins. Every reduction, index and
// probability targets, ignored and all-ignored targets, label smoothing, spatial (N, C, d1)
// inputs, a single class, an empty batch, transposed logits and logits of magnitude 1e4.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using CeFn = Tensor (*)(const Tensor&, const Tensor&, const CrossEntropyOptions&);

const std::pair<Reduction, const char*> kReductions[] = {
    {Reduction::Mean, "mean"}, {Reduction::Sum, "sum"}, {Reduction::None, "none"}};

Tensor targets(std::vector<int64_t> v, const Shape& shape) { return from_vector(v, shape); }

std::vector<Sample> cross_entropy_samples(CeFn f) {
  std::vector<Sample> s;
  for (auto [red, tag] : kReductions) {
    CrossEntropyOptions o;
    o.reduction = red;
    OpFn fn = [f, o](const std::vector<Tensor>& v) { return f(v[0], v[1], o); };
    const std::string r = std::string(tag) + ": ";
    s.push_back(sample(r + "(4, 5) index targets", {arg({4, 5}), fixed(indices({4}, 5))}, fn));
    s.push_back(sample(r + "(2, 3, 4) spatial", {arg({2, 3, 4}), fixed(indices({2, 4}, 3))}, fn));
    s.push_back(sample(r + "(C,) with a 0-d target", {arg({5}), fixed(targets({2}, {}))}, fn));
    s.push_back(sample(r + "probability targets (3, 4)", {arg({3, 4}), arg({3, 4}, {0, 1})}, fn));
  }
  CrossEntropyOptions ignore;
  ignore.ignore_index = 1;
  CrossEntropyOptions smooth;
  smooth.label_smoothing = 0.2;
  CrossEntropyOptions smooth_none = smooth;
  smooth_none.reduction = Reduction::None;
  CrossEntropyOptions sum, none;
  sum.reduction = Reduction::Sum;
  none.reduction = Reduction::None;
  auto with = [f](CrossEntropyOptions o) {
    return [f, o](const std::vector<Tensor>& v) { return f(v[0], v[1], o); };
  };
  OpFn mean = with({});
  s.push_back(
      sample("ignore_index 1", {arg({4, 3}), fixed(targets({1, 0, 1, 2}, {4}))}, with(ignore)));
  s.push_back(forward_only(sample("edge: every target ignored (0 / 0)",
                                  {arg({2, 3}), fixed(targets({1, 1}, {2}))}, with(ignore))));
  s.push_back(sample("label_smoothing 0.2", {arg({4, 5}), fixed(indices({4}, 5))}, with(smooth)));
  s.push_back(sample("label_smoothing 0.2, probability targets, none",
                     {arg({3, 4}), arg({3, 4}, {0, 1})}, with(smooth_none)));
  s.push_back(sample("a single class (3, 1)", {arg({3, 1}), fixed(targets({0, 0, 0}, {3}))}, mean));
  s.push_back(forward_only(sample("edge: empty batch (0, 4), mean is 0 / 0",
                                  {arg({0, 4}), fixed(targets({}, {0}))}, mean)));
  s.push_back(sample("empty batch, sum", {arg({0, 4}), fixed(targets({}, {0}))}, with(sum)));
  s.push_back(
      sample("transposed logits (4, 3)", {transposed({4, 3}), fixed(indices({4}, 3))}, mean));
  s.push_back(sample("strided logits, strided probabilities",
                     {strided({3, 4}), strided({3, 4}, {0, 1})}, mean));
  s.push_back(sample("expanded logits (1, 5) -> (4, 5)",
                     {expanded({1, 5}, {4, 5}), fixed(indices({4}, 5))}, mean));
  s.push_back(large(
      sample("large logits |x| <= 1e4", {arg({4, 5}, kLarge), fixed(indices({4}, 5))}, mean)));
  s.push_back(sample("4-D (2, 3, 2, 2)", {arg({2, 3, 2, 2}), fixed(indices({2, 2, 2}, 3))}, mean));
  s.push_back(big(sample("big (4096, 40)", {arg({4096, 40}), fixed(indices({4096}, 40))}, mean)));
  s.push_back(big(sample("big spatial (64, 40, 64)",
                         {arg({64, 40, 64}), fixed(indices({64, 64}, 40))}, with(none))));
  return s;
}

std::vector<ErrorInput> cross_entropy_errors(CeFn f) {
  return {
      expect<IndexError>(
          "target 5 for 5 classes",
          [f] {
            f(ones({2, 5}), targets({0, 5}, {2}), {});
          },
          "cross_entropy"),
      expect<IndexError>(
          "target -2",
          [f] {
            f(ones({2, 5}), targets({0, -2}, {2}), {});
          },
          "cross_entropy"),
      expect<ShapeError>(
          "target (3,) for logits (2, 5)",
          [f] {
            f(ones({2, 5}), targets({0, 1, 2}, {3}), {});
          },
          "cross_entropy"),
      expect<ShapeError>(
          "probability target (2, 4) for logits (2, 5)",
          [f] {
            f(ones({2, 5}), ones({2, 4}), {});
          },
          "cross_entropy"),
      expect<DTypeError>(
          "int64 logits",
          [f] {
            f(arange(4).reshape({2, 2}), targets({0, 1}, {2}), {});
          },
          "cross_entropy"),
      expect<ShapeError>(
          "0-d logits", [f] { f(ones({}), targets({0}, {}), {}); }, "cross_entropy"),
      expect<ValueError>(
          "label_smoothing 1.5",
          [f] {
            CrossEntropyOptions o;
            o.label_smoothing = 1.5;
            f(ones({2, 5}), targets({0, 1}, {2}), o);
          },
          "cross_entropy"),
  };
}

using KlFn = Tensor (*)(const Tensor&, const Tensor&, const KlDivOptions&);

// Targets are probabilities (kPositive keeps log t finite) or, with log_target, any reals.
std::vector<Sample> kl_div_samples(KlFn f) {
  std::vector<Sample> s;
  const std::pair<KlDivReduction, const char*> reds[] = {{KlDivReduction::None, "none"},
                                                         {KlDivReduction::Sum, "sum"},
                                                         {KlDivReduction::Mean, "mean"},
                                                         {KlDivReduction::BatchMean, "batchmean"}};
  for (auto [red, tag] : reds) {
    for (bool log_target : {false, true}) {
      KlDivOptions o{.reduction = red, .log_target = log_target};
      OpFn fn = [f, o](const std::vector<Tensor>& v) { return f(v[0], v[1], o); };
      const std::string r = std::string(tag) + (log_target ? ", log_target: " : ": ");
      const Dist td = log_target ? Dist{} : kPositive;
      s.push_back(sample(r + "(3, 4)", {arg({3, 4}), arg({3, 4}, td)}, fn));
      s.push_back(sample(r + "broadcast (3, 4) vs (1, 4)", {arg({3, 4}), arg({1, 4}, td)}, fn));
      s.push_back(sample(r + "transposed", {transposed({4, 3}), arg({4, 3}, td)}, fn));
      s.push_back(sample(r + "expanded input", {expanded({1, 3}, {2, 3}), arg({2, 3}, td)}, fn));
      s.push_back(big(sample(r + "big (512, 64)", {arg({512, 64}), arg({512, 64}, td)}, fn)));
    }
  }
  KlDivOptions sum{.reduction = KlDivReduction::Sum};
  s.push_back(sample("empty (0, 4), sum", {arg({0, 4}), arg({0, 4}, kPositive)},
                     [f, sum](const std::vector<Tensor>& v) { return f(v[0], v[1], sum); }));
  return s;
}

using PairFn = Tensor (*)(const Tensor&, const Tensor&, Reduction);
using BceFn = Tensor (*)(const Tensor&, const Tensor&, Reduction, const Tensor&);

std::vector<Sample> mse_samples(PairFn f) {
  std::vector<Sample> s;
  for (auto [red, tag] : kReductions) {
    OpFn fn = [f, red = red](const std::vector<Tensor>& v) { return f(v[0], v[1], red); };
    const std::string r = std::string(tag) + ": ";
    s.push_back(sample(r + "(2, 3)", {arg({2, 3}), arg({2, 3})}, fn));
    s.push_back(sample(r + "0-d", {arg({}), arg({})}, fn));
    s.push_back(sample(r + "transposed a, strided b", {transposed({3, 4}), strided({3, 4})}, fn));
    s.push_back(
        sample(r + "expanded a (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4}), arg({3, 4})}, fn));
    s.push_back(sample(r + "4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2}), arg({2, 1, 3, 2})}, fn));
    s.push_back(
        large(sample(r + "large |x| <= 1e4", {arg({3, 4}, kLarge), arg({3, 4}, kLarge)}, fn)));
    if (red != Reduction::Sum)
      s.push_back(big(sample(r + "big", {arg({264, 512}), arg({264, 512})}, fn)));
  }
  OpFn sum = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], Reduction::Sum); };
  OpFn mean = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], Reduction::Mean); };
  s.push_back(sample("size-0, sum", {arg({0, 3}), arg({0, 3})}, sum));
  s.push_back(
      forward_only(sample("edge: size-0, mean is 0 / 0", {arg({0, 3}), arg({0, 3})}, mean)));
  return s;
}

std::vector<Sample> bce_samples(BceFn f) {
  std::vector<Sample> s;
  for (auto [red, tag] : kReductions) {
    OpFn fn = [f, red = red](const std::vector<Tensor>& v) { return f(v[0], v[1], red, Tensor()); };
    OpFn pw = [f, red = red](const std::vector<Tensor>& v) { return f(v[0], v[1], red, v[2]); };
    const std::string r = std::string(tag) + ": ";
    s.push_back(sample(r + "(2, 3)", {arg({2, 3}), arg({2, 3}, {0, 1})}, fn));
    s.push_back(sample(r + "pos_weight (3) broadcast",
                       {arg({2, 3}), arg({2, 3}, {0, 1}), arg({3}, kPositive)}, pw));
    s.push_back(sample(r + "0-d", {arg({}), arg({}, {0, 1})}, fn));
    s.push_back(sample(r + "transposed logits, strided target",
                       {transposed({3, 4}), strided({3, 4}, {0, 1})}, fn));
    s.push_back(large(sample(r + "large logits |x| <= 1e4 (no overflow)",
                             {arg({3, 4}, kLarge), arg({3, 4}, {0, 1})}, fn)));
    if (red != Reduction::Sum)
      s.push_back(
          big(sample(r + "big with pos_weight",
                     {arg({264, 512}), arg({264, 512}, {0, 1}), arg({512}, kPositive)}, pw)));
  }
  OpFn mean = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], Reduction::Mean, v[2]); };
  s.push_back(sample("expanded logits, 0-d pos_weight",
                     {expanded({3, 1}, {3, 4}), arg({3, 4}, {0, 1}), arg({}, kPositive)}, mean));
  s.push_back(
      sample("4-D", {arg({2, 1, 3, 2}), arg({2, 1, 3, 2}, {0, 1}), arg({2}, kPositive)}, mean));
  s.push_back(
      sample("size-0, sum", {arg({0, 3}), arg({0, 3}, {0, 1}), arg({3}, kPositive)},
             [f](const std::vector<Tensor>& v) { return f(v[0], v[1], Reduction::Sum, v[2]); }));
  return s;
}

std::vector<ErrorInput> pair_errors(const std::string& name,
                                    std::function<void(Tensor, Tensor)> f) {
  return {
      expect<ShapeError>(
          "shapes (2, 3) and (3)",
          [f] {
            f(ones({2, 3}), ones({3}));
          },
          name),
      expect<DTypeError>(
          "float32 and float64", [f] { f(ones({2}), ones({2}, kFloat64)); }, name),
      expect<DTypeError>(
          "int64", [f] { f(arange(2), arange(2)); }, name),
  };
}

}  // namespace

std::vector<OpInfo> loss_ops() {
  std::vector<OpInfo> t;
  for (auto [name, f] :
       {std::pair<const char*, CeFn>{"cross_entropy", cross_entropy},
        std::pair<const char*, CeFn>{"cross_entropy_composite", cross_entropy_composite}}) {
    OpInfo op;
    op.name = name;
    op.samples = [f = f] { return cross_entropy_samples(f); };
    op.errors = [f = f] { return cross_entropy_errors(f); };
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "nll_loss";
    op.samples = [] {
      std::vector<Sample> s;
      auto with = [](NllLossOptions o) {
        return [o](const std::vector<Tensor>& v) { return nll_loss(v[0], v[1], o); };
      };
      for (auto [red, tag] : kReductions) {
        NllLossOptions o;
        o.reduction = red;
        const std::string r = std::string(tag) + ": ";
        s.push_back(sample(r + "(4, 5)", {arg({4, 5}), fixed(indices({4}, 5))}, with(o)));
        s.push_back(
            sample(r + "(2, 3, 4) spatial", {arg({2, 3, 4}), fixed(indices({2, 4}, 3))}, with(o)));
        s.push_back(
            sample(r + "(C,) with a 0-d target", {arg({5}), fixed(targets({3}, {}))}, with(o)));
        s.push_back(
            sample(r + "transposed (4, 3)", {transposed({4, 3}), fixed(indices({4}, 3))}, with(o)));
        if (red != Reduction::Sum)
          s.push_back(big(sample(r + "big (4096, 40)",
                                 {arg({4096, 40}), fixed(indices({4096}, 40))}, with(o))));
      }
      NllLossOptions ignore;
      ignore.ignore_index = 0;
      s.push_back(
          sample("ignore_index 0", {arg({4, 3}), fixed(targets({0, 1, 0, 2}, {4}))}, with(ignore)));
      s.push_back(forward_only(sample("edge: every target ignored",
                                      {arg({2, 3}), fixed(targets({0, 0}, {2}))}, with(ignore))));
      s.push_back(sample("expanded (1, 3) -> (4, 3)",
                         {expanded({1, 3}, {4, 3}), fixed(indices({4}, 3))}, with({})));
      s.push_back(large(
          sample("large |x| <= 1e4", {arg({4, 3}, kLarge), fixed(indices({4}, 3))}, with({}))));
      return s;
    };
    op.errors = [] {
      return std::vector<ErrorInput>{
          expect<IndexError>("target 3 for 3 classes",
                             [] {
                               nll_loss(ones({2, 3}), targets({0, 3}, {2}));
                             }),
          expect<ShapeError>("target (3,) for (2, 3)",
                             [] {
                               nll_loss(ones({2, 3}), targets({0, 1, 2}, {3}));
                             }),
          expect<DTypeError>("float target",
                             [] {
                               nll_loss(ones({2, 3}), ones({2}));
                             }),
      };
    };
    t.push_back(op);
  }
  for (auto [name, f] :
       {std::pair<const char*, PairFn>{"mse_loss", mse_loss},
        std::pair<const char*, PairFn>{"mse_loss_composite", mse_loss_composite}}) {
    OpInfo op;
    op.name = name;
    op.samples = [f = f] { return mse_samples(f); };
    op.errors = [f = f, n = std::string(name)] {
      return pair_errors(n, [f](Tensor a, Tensor b) { f(a, b, Reduction::Mean); });
    };
    t.push_back(op);
  }
  for (auto [name, f] :
       {std::pair<const char*, BceFn>{"binary_cross_entropy_with_logits",
                                      binary_cross_entropy_with_logits},
        std::pair<const char*, BceFn>{"binary_cross_entropy_with_logits_composite",
                                      binary_cross_entropy_with_logits_composite}}) {
    OpInfo op;
    op.name = name;
    op.samples = [f = f] { return bce_samples(f); };
    op.errors = [f = f, n = std::string(name)] {
      auto e = pair_errors(n, [f](Tensor a, Tensor b) { f(a, b, Reduction::Mean, Tensor()); });
      e.push_back(expect<ShapeError>(
          "pos_weight (4) for (2, 3)",
          [f] {
            f(ones({2, 3}), ones({2, 3}), Reduction::Mean, ones({4}));
          },
          n));
      return e;
    };
    t.push_back(op);
  }
  for (auto [name, f] : {std::pair<const char*, KlFn>{"kl_div", kl_div},
                         std::pair<const char*, KlFn>{"kl_div_composite", kl_div_composite}}) {
    OpInfo op;
    op.name = name;
    op.samples = [f = f] { return kl_div_samples(f); };
    op.errors = [f = f] {
      return std::vector<ErrorInput>{
          expect<ShapeError>(
              "target (2, 4) for input (2, 3)",
              [f] {
                f(ones({2, 3}), ones({2, 4}), {});
              },
              "kl_div"),
          expect<DTypeError>(
              "int64 input", [f] { f(arange(3), arange(3), {}); }, "kl_div"),
      };
    };
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "distillation_loss";
    op.samples = [] {
      auto with = [](double temperature, double alpha) {
        return [temperature, alpha](const std::vector<Tensor>& v) {
          return distillation_loss(v[0], v[1], v[2], temperature, alpha);
        };
      };
      return std::vector<Sample>{
          sample("T 2, alpha 0.5 (4, 5)", {arg({4, 5}), arg({4, 5}), fixed(indices({4}, 5))},
                 with(2.0, 0.5)),
          sample("T 1, alpha 1, transposed",
                 {transposed({3, 4}), arg({3, 4}), fixed(indices({3}, 4))}, with(1.0, 1.0)),
          sample("T 4, alpha 0.9, one row", {arg({1, 3}), arg({1, 3}), fixed(indices({1}, 3))},
                 with(4.0, 0.9)),
      };
    };
    op.errors = [] {
      return std::vector<ErrorInput>{
          expect<ValueError>(
              "temperature 0",
              [] {
                distillation_loss(ones({2, 3}), ones({2, 3}), targets({0, 1}, {2}), 0.0, 0.5);
              }),
          expect<ShapeError>(
              "teacher (2, 4) for student (2, 3)",
              [] {
                distillation_loss(ones({2, 3}), ones({2, 4}), targets({0, 1}, {2}), 1.0, 0.5);
              }),
      };
    };
    t.push_back(op);
  }
  return t;
}

}  // namespace nabla::op_db
