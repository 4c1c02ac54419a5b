// op_db entries: reductions (ops/reduce.h), selecting reductions and scans (ops/reduce_dim.h) and
// statistics (ops/statistics.h). Each is reduced over every kind of dim list: all elements, one
// dim (first, last, negative), several, none of them, an empty dim, and the expanded (stride-0)
// dim of an input.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using DimsFn = std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)>;
using AllFn = std::function<Tensor(const Tensor&)>;

OpFn over(const DimsFn& f, std::vector<int64_t> dims, bool keepdim) {
  return [f, dims, keepdim](const std::vector<Tensor>& v) { return f(v[0], dims, keepdim); };
}

// The dims overload over every kind of dim list; `empty_dim`: reducing a size-0 dim is defined.
std::vector<Sample> dims_samples(const DimsFn& f, Dist d, bool empty_dim) {
  std::vector<Sample> s = {
      sample("dims {1} of (2, 3, 4)", {arg({2, 3, 4}, d)}, over(f, {1}, false)),
      sample("dims {0} keepdim of (2, 3, 4)", {arg({2, 3, 4}, d)}, over(f, {0}, true)),
      sample("dims {-1} of (3, 5)", {arg({3, 5}, d)}, over(f, {-1}, false)),
      sample("dims {0, 2} of (2, 3, 4)", {arg({2, 3, 4}, d)}, over(f, {0, 2}, false)),
      sample("dims {-1, 0} keepdim of 4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2}, d)},
             over(f, {-1, 0}, true)),
      sample("dims {} (all) keepdim of (2, 3)", {arg({2, 3}, d)}, over(f, {}, true)),
      sample("dims {0} of size-1 (1, 4)", {arg({1, 4}, d)}, over(f, {0}, false)),
      sample("dims {0} of 0-d", {arg({}, d)}, over(f, {0}, false)),
      sample("dims {1} of size-0 (0, 3)", {arg({0, 3}, d)}, over(f, {1}, false)),
      sample("dims {1} of transposed (3, 4)", {transposed({3, 4}, d)}, over(f, {1}, false)),
      sample("dims {0} of transposed (3, 4)", {transposed({3, 4}, d)}, over(f, {0}, true)),
      sample("dims {1} of strided (3, 4)", {strided({3, 4}, d)}, over(f, {1}, false)),
      sample("dims {1} of expanded (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4}, d)},
             over(f, {1}, false)),
      sample("dims {0} of expanded (1, 4) -> (3, 4)", {expanded({1, 4}, {3, 4}, d)},
             over(f, {0}, false)),
      large(sample("dims {1} of large |x| <= 1e4 (3, 4)", {arg({3, 4}, kLarge)},
                   over(f, {1}, false))),
      big(sample("big: dims {1} of (264, 512)", {arg({264, 512}, d)}, over(f, {1}, false))),
      big(sample("big: dims {0} of (264, 512)", {arg({264, 512}, d)}, over(f, {0}, false))),
      big(sample("big: dims {0, 1} of transposed (264, 512)", {transposed({264, 512}, d)},
                 over(f, {0, 1}, false))),
  };
  if (empty_dim)
    s.push_back(sample("dims {0} of size-0 (0, 3)", {arg({0, 3}, d)}, over(f, {0}, false)));
  return s;
}

// The all-elements overload: the standard unary shapes (the size-0 one only if defined).
std::vector<Sample> all_samples(const AllFn& f, Dist d, bool empty_ok) {
  std::vector<Sample> s;
  for (Sample& x : unary_samples([f](const std::vector<Tensor>& v) { return f(v[0]); }, d, true))
    if (empty_ok || x.name.rfind("size-0", 0) != 0) s.push_back(std::move(x));
  for (Sample& x : s) x.name = "all: " + x.name;
  return s;
}

std::vector<ErrorInput> dims_errors(const std::string& name, const DimsFn& f) {
  return {
      expect<ShapeError>(
          "dim 2 of a 2-D tensor",
          [f] {
            f(ones({2, 3}), {2}, false);
          },
          name),
      expect<ShapeError>(
          "dim -3 of a 2-D tensor",
          [f] {
            f(ones({2, 3}), {-3}, false);
          },
          name),
      expect<ShapeError>(
          "dim 1 twice (as 1 and -1)",
          [f] {
            f(ones({2, 3}), {1, -1}, false);
          },
          name),
  };
}

OpInfo reduction(const std::string& name, DimsFn f, AllFn all, Dist d, bool empty_ok) {
  OpInfo op;
  op.name = name;
  op.samples = [f, all, d, empty_ok] {
    auto s = dims_samples(f, d, empty_ok);
    if (all) append(s, all_samples(all, d, empty_ok));
    return s;
  };
  op.errors = [name, f] { return dims_errors(name, f); };
  return op;
}

OpInfo extremum(const std::string& name, bool is_max) {
  auto along = [is_max](const Tensor& x, int64_t dim, bool keepdim) {
    return is_max ? max(x, dim, keepdim) : min(x, dim, keepdim);
  };
  auto all = [is_max](const Tensor& x) { return is_max ? max(x) : min(x); };
  OpInfo op;
  op.name = name;
  op.dtypes = {kFloat32, kFloat64, kInt64};
  op.samples = [along, all] {
    auto reduced = [along](int64_t dim, bool keepdim) {
      return [along, dim, keepdim](const std::vector<Tensor>& v) {
        return along(v[0], dim, keepdim).values;
      };
    };
    // The indices, in the input's dtype so the layout and thread checks compare them too.
    auto indices = [along](int64_t dim) {
      return [along, dim](const std::vector<Tensor>& v) {
        return along(v[0], dim, false).indices.to(v[0].dtype());
      };
    };
    std::vector<Sample> s = {
        sample("dim 1 of (2, 3, 4)", {arg({2, 3, 4})}, reduced(1, false)),
        sample("dim 0 keepdim of (3, 4)", {arg({3, 4})}, reduced(0, true)),
        sample("dim -1 of 4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2})}, reduced(-1, false)),
        sample("dim 0 of 0-d", {arg({})}, reduced(0, false)),
        sample("dim 0 of size-1 (1, 3)", {arg({1, 3})}, reduced(0, false)),
        sample("dim 1 of size-0 (0, 3)", {arg({0, 3})}, reduced(1, false)),
        sample("dim 1 of transposed (3, 4)", {transposed({3, 4})}, reduced(1, false)),
        sample("dim 0 of strided (3, 4)", {strided({3, 4})}, reduced(0, false)),
        large(sample("dim 1 of large (3, 4)", {arg({3, 4}, kLarge)}, reduced(1, false))),
        forward_only(sample("ties along dim 1 (the first index wins)",
                            {values({2, 3}, {1, 1, 0, -2, 5, 5})}, reduced(1, false))),
        forward_only(sample("nan wins", {values({2, 2}, {std::nan(""), 1, 2, std::nan("")})},
                            reduced(1, false))),
        big(sample("big: dim 1 of (264, 512)", {arg({264, 512})}, reduced(1, false))),
        big(sample("big: dim 0 of (264, 512)", {arg({264, 512})}, reduced(0, false))),
        sample("indices along dim 1 of transposed (3, 4)", {no_grad(transposed({3, 4}))},
               indices(1)),
        sample("indices along dim 0 of expanded (1, 4) -> (3, 4) (all tied)",
               {no_grad(expanded({1, 4}, {3, 4}))}, indices(0)),
    };
    OpFn all_fn = [all](const std::vector<Tensor>& v) { return all(v[0]); };
    for (Sample& x : unary_samples(all_fn, {}, true))
      if (x.name.rfind("size-0", 0) != 0) {
        x.name = "all: " + x.name;
        s.push_back(std::move(x));
      }
    Sample ties = sample("all: ties share the gradient", {values({4}, {3, 1, 3, -1})}, all_fn);
    ties.gradgradcheck = false;
    s.push_back(ties);
    return s;
  };
  op.errors = [along, all, name] {
    return std::vector<ErrorInput>{
        expect<ShapeError>(
            "dim 0 of size 0",
            [along] {
              along(ones({0, 3}), 0, false);
            },
            name),
        expect<ShapeError>(
            "all of an empty tensor", [all] { all(ones({0})); }, name),
        expect<ShapeError>(
            "dim 2 of a 2-D tensor",
            [along] {
              along(ones({2, 3}), 2, false);
            },
            name),
        expect<DTypeError>(
            "bool input", [along] { along(ones({2}, kBool), 0, false); }, name),
    };
  };
  return op;
}

Tensor sum_dims(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x, d, k); }
Tensor mean_dims(const Tensor& x, const std::vector<int64_t>& d, bool k) { return mean(x, d, k); }

}  // namespace

std::vector<OpInfo> reduction_ops() {
  std::vector<OpInfo> t;
  t.push_back(reduction(
      "sum", sum_dims, [](const Tensor& x) { return sum(x); }, {}, true));
  t.back().dtypes = {kFloat32, kFloat64, kInt64, kBool};  // bool counts into int64
  t.push_back(reduction(
      "mean", mean_dims, [](const Tensor& x) { return mean(x); }, {}, false));
  t.push_back(extremum("max", true));
  t.push_back(extremum("min", false));
  {
    OpInfo c;
    c.name = "cumsum";
    c.dtypes = {kFloat32, kFloat64, kInt64};
    c.samples = [] {
      auto along = [](int64_t dim) {
        return [dim](const std::vector<Tensor>& v) { return cumsum(v[0], dim); };
      };
      return std::vector<Sample>{
          sample("dim 0 of (5)", {arg({5})}, along(0)),
          sample("dim 1 of (2, 3, 4)", {arg({2, 3, 4})}, along(1)),
          sample("dim -1 of (3, 4)", {arg({3, 4})}, along(-1)),
          sample("dim 0 of 0-d", {arg({})}, along(0)),
          sample("dim 0 of size-0 (0, 3)", {arg({0, 3})}, along(0)),
          sample("dim 1 of transposed (3, 4)", {transposed({3, 4})}, along(1)),
          sample("dim 1 of strided (3, 4)", {strided({3, 4})}, along(1)),
          sample("dim 1 of expanded (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4})}, along(1)),
          sample("dim 2 of 4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2})}, along(2)),
          large(sample("dim 1 of large (3, 4)", {arg({3, 4}, kLarge)}, along(1))),
          big(sample("big: dim 1 of (264, 512)", {arg({264, 512})}, along(1))),
          big(sample("big: dim 0 of (264, 512)", {arg({264, 512})}, along(0))),
      };
    };
    c.errors = [] {
      return std::vector<ErrorInput>{
          expect<ShapeError>("dim 2 of a 2-D tensor",
                             [] {
                               cumsum(ones({2, 3}), 2);
                             }),
          expect<DTypeError>("bool input", [] { cumsum(ones({2}, kBool), 0); }),
      };
    };
    t.push_back(c);
  }
  for (bool is_std : {false, true}) {
    const char* name = is_std ? "std" : "var";
    for (bool unbiased : {true, false}) {
      DimsFn f = [is_std, unbiased](const Tensor& x, const std::vector<int64_t>& d, bool k) {
        return is_std ? nabla::std(x, d, unbiased, k) : var(x, d, unbiased, k);
      };
      AllFn all = [is_std](const Tensor& x) { return is_std ? nabla::std(x) : var(x); };
      OpInfo op = reduction(name, f, unbiased ? all : AllFn{}, {}, false);
      auto base = op.samples;
      op.samples = [base, f, unbiased] {
        auto s = unbiased ? base() : without_big(base());
        for (Sample& x : s) {
          // One element with Bessel's correction: 0 / 0 = nan, value and gradient (as PyTorch).
          const bool one =
              x.name.find("0-d") != std::string::npos || x.name.find("size-1") != std::string::npos;
          if (unbiased && one) x = forward_only(x);
          x.name =
              (unbiased ? "unbiased " : "biased ") + x.name + (unbiased && one ? " (nan)" : "");
        }
        s.push_back(sample("1e4 + [0, 1) (cancellation)", {arg({3, 4}, {1e4, 1e4 + 1})},
                           over(f, {1}, false)));
        s.push_back(
            forward_only(sample("edge: constant rows (std: gradient 0 by convention)",
                                {values({2, 2}, {0.5, 0.5, -1, -1})}, over(f, {1}, false))));
        s.push_back(
            forward_only(sample("edge: one element", {values({1}, {2})}, over(f, {0}, false))));
        return s;
      };
      if (!unbiased) {  // one entry per name: the biased samples join the unbiased entry
        auto first = t.back().samples;
        t.back().samples = [first, more = op.samples] {
          auto s = first();
          append(s, more());
          return s;
        };
        continue;
      }
      t.push_back(op);
    }
  }
  {
    DimsFn f = [](const Tensor& x, const std::vector<int64_t>& d, bool k) {
      return logsumexp(x, d, k);
    };
    OpInfo op = reduction("logsumexp", f, nullptr, {-4, 4}, true);
    auto base = op.samples;
    op.samples = [base, f] {
      auto s = base();
      s.push_back(sample("rows near +-1e4 and a -inf (no overflow)",
                         {values({2, 3}, {1e4, 1e4 - 1, -INFINITY, -1e4, -1e4 + 2, -1e4})},
                         over(f, {1}, false)));
      s.push_back(
          forward_only(sample("edge: a row of -inf", {values({2, 2}, {-INFINITY, -INFINITY, 0, 1})},
                              over(f, {1}, false))));
      return s;
    };
    t.push_back(op);
  }
  {
    OpInfo op;
    op.name = "norm";
    op.samples = [] {
      std::vector<Sample> s;
      for (double p : {2.0, double(INFINITY)}) {
        const std::string tag = p == 2.0 ? "p=2 " : "p=inf ";
        DimsFn f = [p](const Tensor& x, const std::vector<int64_t>& d, bool k) {
          return norm(x, p, d, k);
        };
        auto d = dims_samples(f, {}, true);
        for (Sample& x : p == 2.0 ? d : without_big(d)) {
          x.name = tag + x.name;
          s.push_back(std::move(x));
        }
        auto a = all_samples([p](const Tensor& x) { return norm(x, p); }, {}, true);
        for (Sample& x : p == 2.0 ? a : without_big(a)) {
          x.name = tag + x.name;
          s.push_back(std::move(x));
        }
        s.push_back(forward_only(
            sample(tag + "edge: zero vector", {values({3}, {0, 0, 0})}, over(f, {0}, false))));
      }
      Sample ties = sample("p=inf ties share the gradient", {values({4}, {-3, 1, 3, 2})},
                           [](const std::vector<Tensor>& v) { return norm(v[0], INFINITY); });
      ties.gradgradcheck = false;
      s.push_back(ties);
      return s;
    };
    op.errors = [] {
      auto e = dims_errors("norm", [](const Tensor& x, const std::vector<int64_t>& d, bool k) {
        return norm(x, 2.0, d, k);
      });
      e.push_back(expect<ValueError>("p = 1", [] { norm(ones({3}), 1.0); }));
      return e;
    };
    t.push_back(op);
  }
  return t;
}

}  // namespace nabla::op_db
