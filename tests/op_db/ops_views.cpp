// op_db entries: the Tensor methods that are differentiable ops (core/tensor.h): views, reshape,
// contiguous, clone and dtype conversion. Views of views are covered because every sample's
// input may itself be a transposed, strided or expanded view.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using Method = std::function<Tensor(const Tensor&)>;

// The standard layouts (0-d and size-0 where the method takes them) under one method.
std::vector<Sample> view_layouts(const Method& m, bool scalar = true) {
  std::vector<Sample> s = {
      sample("(2, 3)", {arg({2, 3})}, on_first(m)),
      sample("transposed (3, 4)", {transposed({3, 4})}, on_first(m)),
      sample("strided (2, 3)", {strided({2, 3})}, on_first(m)),
      sample("expanded (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4})}, on_first(m)),
      sample("size-0 (0, 3)", {arg({0, 3})}, on_first(m)),
      sample("4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2})}, on_first(m)),
      big(sample("big transposed", {transposed({264, 512})}, on_first(m))),
  };
  if (scalar) s.push_back(sample("0-d", {arg({})}, on_first(m)));
  return s;
}

OpInfo method(const std::string& name, std::function<std::vector<Sample>()> samples,
              std::function<std::vector<ErrorInput>()> errors = nullptr) {
  OpInfo op;
  op.name = name;
  op.dtypes = kAllDTypes;
  op.samples = std::move(samples);
  op.errors = std::move(errors);
  return op;
}

template <class E>
std::vector<ErrorInput> one(std::string what, std::function<void()> call) {
  return {expect<E>(std::move(what), std::move(call))};
}

}  // namespace

std::vector<OpInfo> view_ops() {
  std::vector<OpInfo> t;
  t.push_back(method("to", [] {
    // To float64 and back: exact both ways, and ToBackward runs twice for a float32 input.
    auto s = view_layouts([](const Tensor& x) { return x.to(kFloat64).to(x.dtype()); });
    // A step of 1e-2 makes the rounding to float32 (relative 6e-8) invisible to gradcheck.
    Sample rounds = sample("to float32 and back (rounds)", {arg({2, 3})},
                           on_first([](const Tensor& x) { return x.to(kFloat32).to(x.dtype()); }));
    rounds.eps = 1e-2;
    s.push_back(rounds);
    s.push_back(
        forward_only(sample("to int64 and back (truncates, no gradient)", {arg({2, 3}, {-5, 5})},
                            on_first([](const Tensor& x) { return x.to(kInt64).to(x.dtype()); }))));
    s.push_back(
        forward_only(sample("to bool and back", {transposed({2, 3})},
                            on_first([](const Tensor& x) { return x.to(kBool).to(x.dtype()); }))));
    return s;
  }));
  t.push_back(method("contiguous",
                     [] { return view_layouts([](const Tensor& x) { return x.contiguous(); }); }));
  t.push_back(
      method("clone", [] { return view_layouts([](const Tensor& x) { return x.clone(); }); }));
  t.push_back(method(
      "view",
      [] {
        auto as = [](Shape shape) { return [shape](const Tensor& x) { return x.view(shape); }; };
        return std::vector<Sample>{
            sample("(2, 3) as (3, 2)", {arg({2, 3})}, on_first(as({3, 2}))),
            sample("(6) as (2, -1)", {arg({6})}, on_first(as({2, -1}))),
            sample("0-d as (1, 1)", {arg({})}, on_first(as({1, 1}))),
            sample("(1) as 0-d", {arg({1})}, on_first(as({}))),
            sample("size-0 (0, 3) as (3, 0)", {arg({0, 3})}, on_first(as({3, 0}))),
            sample("strided (4, 3) as (2, 2, 3)", {strided({4, 3})}, on_first(as({2, 2, 3}))),
            sample("expanded (3, 1) -> (3, 4) as (3, 2, 2)", {expanded({3, 1}, {3, 4})},
                   on_first(as({3, 2, 2}))),
            sample("transposed (3, 4) as (3, 2, 2)", {transposed({3, 4})}, on_first(as({3, 2, 2}))),
            big(sample("big as (-1)", {arg({264, 512})}, on_first(as({-1})))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ShapeError>("transposed (3, 4) as (12)",
                               [] {
                                 ones({4, 3}).t().view({12});
                               }),
            expect<ShapeError>("6 elements as (4)", [] { ones({6}).view({4}); }),
            expect<ShapeError>("two -1",
                               [] {
                                 ones({6}).view({-1, -1});
                               }),
        };
      }));
  t.back().any_layout = false;
  t.push_back(method(
      "reshape",
      [] {
        auto as = [](Shape shape) { return [shape](const Tensor& x) { return x.reshape(shape); }; };
        return std::vector<Sample>{
            sample("(2, 3) as (3, 2)", {arg({2, 3})}, on_first(as({3, 2}))),
            sample("transposed (3, 4) as (12) (copies)", {transposed({3, 4})}, on_first(as({12}))),
            sample("expanded (3, 1) -> (3, 4) as (-1, 6)", {expanded({3, 1}, {3, 4})},
                   on_first(as({-1, 6}))),
            sample("strided (2, 3) as (3, 2)", {strided({2, 3})}, on_first(as({3, 2}))),
            sample("0-d as (1)", {arg({})}, on_first(as({1}))),
            sample("size-0 (0, 3) as (3, 0, 1)", {arg({0, 3})}, on_first(as({3, 0, 1}))),
            big(sample("big transposed as (-1)", {transposed({264, 512})}, on_first(as({-1})))),
        };
      },
      [] { return one<ShapeError>("6 elements as (4, -1)", [] {
             ones({6}).reshape({4, -1});
           }); }));
  t.push_back(method(
      "transpose",
      [] {
        auto tr = [](int64_t a, int64_t b) {
          return [a, b](const Tensor& x) { return x.transpose(a, b); };
        };
        return std::vector<Sample>{
            sample("(2, 3, 4) dims 0, 2", {arg({2, 3, 4})}, on_first(tr(0, 2))),
            sample("(2, 3) dims -1, -2", {arg({2, 3})}, on_first(tr(-1, -2))),
            sample("(3) dims 0, 0", {arg({3})}, on_first(tr(0, 0))),
            sample("transposed back", {transposed({3, 4})}, on_first(tr(0, 1))),
            sample("expanded", {expanded({3, 1}, {3, 4})}, on_first(tr(0, 1))),
            sample("size-0", {arg({0, 3})}, on_first(tr(0, 1))),
            big(sample("big", {arg({264, 512})}, on_first(tr(0, 1)))),
        };
      },
      [] { return one<ShapeError>("dim 2 of 2-D", [] {
             ones({2, 3}).transpose(0, 2);
           }); }));
  t.push_back(method(
      "t",
      [] {
        auto s = view_layouts([](const Tensor& x) { return x.t(); });
        std::erase_if(s, [](const Sample& x) { return x.name.starts_with("4-D"); });
        s.push_back(
            sample("1-D (unchanged)", {arg({3})}, on_first([](const Tensor& x) { return x.t(); })));
        return s;
      },
      [] { return one<ShapeError>("3-D", [] {
             ones({2, 3, 4}).t();
           }); }));
  t.push_back(method(
      "mT",
      [] {
        auto s = view_layouts([](const Tensor& x) { return x.mT(); }, false);
        s.push_back(sample("3-D (2, 3, 4)", {arg({2, 3, 4})},
                           on_first([](const Tensor& x) { return x.mT(); })));
        return s;
      },
      [] { return one<ShapeError>("1-D", [] { ones({3}).mT(); }); }));
  t.push_back(method(
      "permute",
      [] {
        auto p = [](std::vector<int64_t> d) {
          return [d](const Tensor& x) { return x.permute(d); };
        };
        return std::vector<Sample>{
            sample("(2, 3, 4) {2, 0, 1}", {arg({2, 3, 4})}, on_first(p({2, 0, 1}))),
            sample("(2, 3) {-1, 0}", {arg({2, 3})}, on_first(p({-1, 0}))),
            sample("0-d {}", {arg({})}, on_first(p({}))),
            sample("transposed {1, 0}", {transposed({3, 4})}, on_first(p({1, 0}))),
            sample("4-D expanded {3, 1, 0, 2}", {expanded({2, 1, 3, 1}, {2, 4, 3, 2})},
                   on_first(p({3, 1, 0, 2}))),
            sample("size-0 {1, 0}", {arg({0, 3})}, on_first(p({1, 0}))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ShapeError>("dim repeated",
                               [] {
                                 ones({2, 3}).permute({0, 0});
                               }),
            expect<ShapeError>("too few dims",
                               [] {
                                 ones({2, 3}).permute({0});
                               }),
        };
      }));
  t.push_back(method(
      "narrow",
      [] {
        auto n = [](int64_t d, int64_t s, int64_t l) {
          return [d, s, l](const Tensor& x) { return x.narrow(d, s, l); };
        };
        return std::vector<Sample>{
            sample("(4, 3) dim 0 from 1 length 2", {arg({4, 3})}, on_first(n(0, 1, 2))),
            sample("(4, 3) dim -1 from -2 length 2", {arg({4, 3})}, on_first(n(-1, -2, 2))),
            sample("length 0", {arg({4, 3})}, on_first(n(1, 3, 0))),
            sample("transposed", {transposed({3, 4})}, on_first(n(1, 1, 2))),
            sample("expanded", {expanded({3, 1}, {3, 4})}, on_first(n(1, 1, 3))),
            big(sample("big", {arg({264, 512})}, on_first(n(1, 10, 400)))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<IndexError>("past the end", [] { ones({4}).narrow(0, 3, 2); }),
            expect<ValueError>("negative length", [] { ones({4}).narrow(0, 0, -1); }),
        };
      }));
  t.push_back(method(
      "slice",
      [] {
        auto sl = [](int64_t d, int64_t s, int64_t e, int64_t step) {
          return [d, s, e, step](const Tensor& x) { return x.slice(d, s, e, step); };
        };
        return std::vector<Sample>{
            sample("(5, 3) dim 0 [1:4]", {arg({5, 3})}, on_first(sl(0, 1, 4, 1))),
            sample("(5, 3) dim 0 [::2]", {arg({5, 3})}, on_first(sl(0, 0, 5, 2))),
            sample("(3, 7) dim -1 [-5:-1:3]", {arg({3, 7})}, on_first(sl(-1, -5, -1, 3))),
            sample("end past the size (clamped)", {arg({3, 4})}, on_first(sl(1, 2, 100, 1))),
            sample("empty [3:1]", {arg({3, 4})}, on_first(sl(1, 3, 1, 1))),
            sample("strided input [1::2]", {strided({3, 4})}, on_first(sl(1, 1, 4, 2))),
            sample("expanded input", {expanded({3, 1}, {3, 4})}, on_first(sl(1, 0, 4, 3))),
            big(sample("big [::3] dim 1", {arg({264, 512})}, on_first(sl(1, 0, 512, 3)))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ValueError>("step 0", [] { ones({4}).slice(0, 0, 4, 0); }),
            expect<ShapeError>(
                "dim 1 of 1-D", [] { ones({4}).slice(1, 0, 4, 1); }, "slice"),
        };
      }));
  t.push_back(method(
      "select",
      [] {
        auto sel = [](int64_t d, int64_t i) {
          return [d, i](const Tensor& x) { return x.select(d, i); };
        };
        return std::vector<Sample>{
            sample("(3, 4) dim 0 index 1", {arg({3, 4})}, on_first(sel(0, 1))),
            sample("(3, 4) dim -1 index -1", {arg({3, 4})}, on_first(sel(-1, -1))),
            sample("1-D to 0-d", {arg({3})}, on_first(sel(0, 2))),
            sample("transposed", {transposed({3, 4})}, on_first(sel(1, 0))),
            sample("expanded", {expanded({3, 1}, {3, 4})}, on_first(sel(1, 3))),
            sample("size-0 (0, 3) dim 1", {arg({0, 3})}, on_first(sel(1, 2))),
            big(sample("big", {arg({264, 512})}, on_first(sel(0, 7)))),
        };
      },
      [] { return one<IndexError>("index 3 of size 3", [] { ones({3}).select(0, 3); }); }));
  t.push_back(method(
      "expand",
      [] {
        auto ex = [](Shape s) { return [s](const Tensor& x) { return x.expand(s); }; };
        return std::vector<Sample>{
            sample("(3, 1) -> (3, 4)", {arg({3, 1})}, on_first(ex({3, 4}))),
            sample("(4) -> (2, 3, 4)", {arg({4})}, on_first(ex({2, 3, 4}))),
            sample("-1 keeps a dim", {arg({3, 1})}, on_first(ex({2, -1, 5}))),
            sample("0-d -> (2, 3)", {arg({})}, on_first(ex({2, 3}))),
            sample("(1, 3) -> (0, 3)", {arg({1, 3})}, on_first(ex({0, 3}))),
            sample("transposed (1, 4) -> (3, 1, 4)", {transposed({1, 4})}, on_first(ex({3, 1, 4}))),
            big(sample("big", {arg({264, 1})}, on_first(ex({264, 512})))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<ShapeError>("(3) to (4)", [] { ones({3}).expand({4}); }),
            expect<ShapeError>("to fewer dims",
                               [] {
                                 ones({2, 3}).expand({3});
                               }),
        };
      }));
  t.push_back(method(
      "expand_as",
      [] {
        OpFn fn = [](const std::vector<Tensor>& v) { return v[0].expand_as(v[1]); };
        return std::vector<Sample>{
            sample("(3, 1) as (3, 4)", {arg({3, 1}), fixed(zeros({3, 4}, kFloat64))}, fn),
            sample("0-d as (2, 3)", {arg({}), fixed(zeros({2, 3}, kFloat64))}, fn),
            sample("strided (2, 1) as (2, 2, 3)",
                   {strided({2, 1}), fixed(zeros({2, 2, 3}, kFloat64))}, fn),
        };
      },
      [] {
        // expand_as is expand(other.shape()): the message names expand.
        return std::vector<ErrorInput>{expect<ShapeError>(
            "(3) as (4)", [] { ones({3}).expand_as(ones({4})); }, "expand")};
      }));
  t.push_back(method(
      "squeeze",
      [] {
        auto all = [](const Tensor& x) { return x.squeeze(); };
        auto at = [](int64_t d) { return [d](const Tensor& x) { return x.squeeze(d); }; };
        return std::vector<Sample>{
            sample("all of (2, 1, 3, 1)", {arg({2, 1, 3, 1})}, on_first(all)),
            sample("all of 0-d", {arg({})}, on_first(all)),
            sample("all of (1, 1)", {arg({1, 1})}, on_first(all)),
            sample("dim 1 of (2, 1, 3)", {arg({2, 1, 3})}, on_first(at(1))),
            sample("dim 0 of (2, 3) (kept)", {arg({2, 3})}, on_first(at(0))),
            sample("dim -1 of transposed (1, 3)^T", {transposed({3, 1})}, on_first(at(-1))),
            sample("all of expanded (1, 1) -> (1, 4)", {expanded({1, 1}, {1, 4})}, on_first(all)),
            sample("size-0 (0, 1)", {arg({0, 1})}, on_first(all)),
        };
      },
      [] { return one<ShapeError>("dim 2 of 2-D", [] {
             ones({2, 1}).squeeze(2);
           }); }));
  t.push_back(method(
      "unsqueeze",
      [] {
        auto at = [](int64_t d) { return [d](const Tensor& x) { return x.unsqueeze(d); }; };
        return std::vector<Sample>{
            sample("dim 0 of (2, 3)", {arg({2, 3})}, on_first(at(0))),
            sample("dim -1 of (2, 3)", {arg({2, 3})}, on_first(at(-1))),
            sample("dim 0 of 0-d", {arg({})}, on_first(at(0))),
            sample("dim 1 of transposed", {transposed({3, 4})}, on_first(at(1))),
            sample("dim 1 of expanded", {expanded({3, 1}, {3, 4})}, on_first(at(1))),
            sample("dim 1 of size-0", {arg({0, 3})}, on_first(at(1))),
        };
      },
      [] { return one<ShapeError>("dim 3 of 1-D", [] { ones({2}).unsqueeze(3); }); }));
  t.push_back(method(
      "flatten",
      [] {
        auto fl = [](int64_t s, int64_t e) {
          return [s, e](const Tensor& x) { return x.flatten(s, e); };
        };
        auto s = view_layouts(fl(0, -1));
        s.push_back(sample("dims 1..2 of (2, 3, 4, 1)", {arg({2, 3, 4, 1})}, on_first(fl(1, 2))));
        s.push_back(
            sample("dims -2..-1 of transposed 3-D", {transposed({2, 3, 4})}, on_first(fl(-2, -1))));
        return s;
      },
      [] { return one<ShapeError>("start after end", [] {
             ones({2, 3, 4}).flatten(2, 1);
           }); }));
  t.push_back(method(
      "unflatten",
      [] {
        auto un = [](int64_t d, Shape s) {
          return [d, s](const Tensor& x) { return x.unflatten(d, s); };
        };
        return std::vector<Sample>{
            sample("dim 0 of (6, 2) into (2, 3)", {arg({6, 2})}, on_first(un(0, {2, 3}))),
            sample("dim -1 of (2, 6) into (3, -1)", {arg({2, 6})}, on_first(un(-1, {3, -1}))),
            sample("transposed", {transposed({4, 3})}, on_first(un(0, {2, 2}))),
            sample("size-0 dim into (0, 5)", {arg({2, 0})}, on_first(un(1, {0, 5}))),
        };
      },
      [] { return one<ShapeError>("6 into (4, 2)", [] {
             ones({6}).unflatten(0, {4, 2});
           }); }));
  return t;
}

}  // namespace nabla::op_db
