// op_db entries: matmul (ops/linalg.h), linear and linear_activation (ops/linear.h), layer_norm
// and dropout: every product shape of matmul's semantics, operands BLAS reads in place
// (transposed) or must copy (strided, expanded), empty products, rows of one element and rows
// offset by 1e4 (cancellation).
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

std::vector<Sample> matmul_samples() {
  OpFn mm = [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); };
  return {
      sample("1-D . 1-D (dot)", {arg({4}), arg({4})}, mm),
      sample("2-D x 1-D", {arg({3, 4}), arg({4})}, mm),
      sample("1-D x 2-D", {arg({3}), arg({3, 4})}, mm),
      sample("2-D x 2-D", {arg({2, 3}), arg({3, 4})}, mm),
      sample("batched (2, 3, 4) x (4, 5)", {arg({2, 3, 4}), arg({4, 5})}, mm),
      sample("broadcast batch (2, 1, 3, 4) x (3, 4, 2)", {arg({2, 1, 3, 4}), arg({3, 4, 2})}, mm),
      sample("1-D x batched (2, 3, 4)", {arg({3}), arg({2, 3, 4})}, mm),
      sample("transposed a and b", {transposed({3, 4}), transposed({4, 2})}, mm),
      sample("strided a, transposed batched b", {strided({3, 4}), transposed({2, 4, 3})}, mm),
      sample("expanded batch (1, 3, 4) -> (2, 3, 4) x (2, 4, 2)",
             {expanded({1, 3, 4}, {2, 3, 4}), arg({2, 4, 2})}, mm),
      sample("size-1 dims (1, 1) x (1, 3)", {arg({1, 1}), arg({1, 3})}, mm),
      sample("K = 0 (zeros)", {arg({2, 0}), arg({0, 3})}, mm),
      sample("M = 0", {arg({0, 3}), arg({3, 2})}, mm),
      sample("batch 0", {arg({0, 2, 3}), arg({3, 2})}, mm),
      large(sample("large |x| <= 1e4", {arg({3, 4}, kLarge), arg({4, 2}, kLarge)}, mm)),
      big(sample("big 64 x 64 x 64", {arg({64, 64}), arg({64, 64})}, mm)),
      big(sample("big transposed b (96, 48) x (48, 96)^T", {arg({96, 48}), transposed({48, 96})},
                 mm)),
      big(sample("big batched (32, 16, 16) x (32, 16, 16)", {arg({32, 16, 16}), arg({32, 16, 16})},
                 mm)),
      big(sample("big broadcast (16, 64) x (8, 64, 32)", {arg({16, 64}), arg({8, 64, 32})}, mm)),
  };
}

// linear(x, w, b) and the fused activations: the same shapes, with and without bias.
std::vector<Sample> linear_samples(
    std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f) {
  OpFn with_bias = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], v[2]); };
  OpFn no_bias = [f](const std::vector<Tensor>& v) { return f(v[0], v[1], Tensor()); };
  return {
      sample("(2, 3) (4, 3) (4)", {arg({2, 3}), arg({4, 3}), arg({4})}, with_bias),
      sample("no bias", {arg({2, 3}), arg({4, 3})}, no_bias),
      sample("1-D x", {arg({3}), arg({4, 3}), arg({4})}, with_bias),
      sample("batched (2, 2, 3)", {arg({2, 2, 3}), arg({4, 3}), arg({4})}, with_bias),
      sample("transposed x and weight", {transposed({5, 3}), transposed({4, 3}), arg({4})},
             with_bias),
      sample("strided x, expanded bias", {strided({2, 3}), arg({4, 3}), expanded({1}, {4})},
             with_bias),
      sample("size-0 batch", {arg({0, 3}), arg({4, 3}), arg({4})}, with_bias),
      sample("in = 0", {arg({2, 0}), arg({4, 0}), arg({4})}, with_bias),
      sample("one output", {arg({3, 2}), arg({1, 2}), arg({1})}, with_bias),
      large(sample("large |x| <= 1e4", {arg({2, 3}, kLarge), arg({4, 3}), arg({4})}, with_bias)),
      big(sample("big (512, 64) (128, 64)", {arg({512, 64}), arg({128, 64}), arg({128})},
                 with_bias)),
  };
}

std::vector<ErrorInput> linear_errors(const std::string& name,
                                      std::function<void(Tensor, Tensor, Tensor)> f) {
  return {
      expect<ShapeError>(
          "in 3 vs weight in 2",
          [f] {
            f(ones({2, 3}), ones({4, 2}), ones({4}));
          },
          name),
      expect<ShapeError>(
          "bias (3) for out 4",
          [f] {
            f(ones({2, 3}), ones({4, 3}), ones({3}));
          },
          name),
      expect<DTypeError>(
          "float64 weight",
          [f] {
            f(ones({2, 3}), ones({4, 3}, kFloat64), ones({4}));
          },
          name),
      expect<ShapeError>(
          "0-d x",
          [f] {
            f(ones({}), ones({4, 1}), ones({4}));
          },
          name),
  };
}

using LnFn = Tensor (*)(const Tensor&, const Shape&, const Tensor&, const Tensor&, double);

std::vector<Sample> layer_norm_samples(LnFn f) {
  auto ln = [f](Shape s, bool affine, double eps = 1e-5) {
    return [f, s, affine, eps](const std::vector<Tensor>& v) {
      return affine ? f(v[0], s, v[1], v[2], eps) : f(v[0], s, Tensor(), Tensor(), eps);
    };
  };
  return {
      sample("(3, 4) over (4), affine", {arg({3, 4}), arg({4}), arg({4})}, ln({4}, true)),
      sample("(3, 4) over (4), no affine", {arg({3, 4})}, ln({4}, false)),
      sample("(2, 3, 4) over (3, 4)", {arg({2, 3, 4}), arg({3, 4}), arg({3, 4})}, ln({3, 4}, true)),
      sample("1-D (5)", {arg({5}), arg({5}), arg({5})}, ln({5}, true)),
      sample("rows of one element", {arg({3, 1}), arg({1}), arg({1})}, ln({1}, true)),
      sample("size-0 batch", {arg({0, 4}), arg({4}), arg({4})}, ln({4}, true)),
      sample("transposed x", {transposed({3, 4}), arg({4}), arg({4})}, ln({4}, true)),
      sample("strided x, expanded weight", {strided({3, 4}), expanded({1}, {4}), arg({4})},
             ln({4}, true)),
      sample("expanded (constant) rows, eps 0.1", {expanded({3, 1}, {3, 4}), arg({4}), arg({4})},
             ln({4}, true, 0.1)),
      sample("4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2}), arg({2}), arg({2})}, ln({2}, true)),
      large(sample("large |x| <= 1e4", {arg({3, 4}, kLarge), arg({4}), arg({4})}, ln({4}, true))),
      [&] {
        // The composite's float32 mean of 1e4-offset rows is itself rounded by 5e-4 (half an
        // ulp at 1e4), 0.2% of these rows' spread: only the fused kernel (double sums) agrees.
        Sample s = sample("1e4 + [0, 1) (cancellation; float32 on the fused kernel)",
                          {arg({3, 4}, {1e4, 1e4 + 1}), arg({4}), arg({4})}, ln({4}, true));
        s.float32 = f == layer_norm;
        return s;
      }(),
      big(sample("big rows of 512", {arg({264, 512}), arg({512}), arg({512})}, ln({512}, true))),
      big(sample("big rows of 8", {arg({16384, 8}), arg({8}), arg({8})}, ln({8}, true))),
  };
}

std::vector<ErrorInput> layer_norm_errors(LnFn f) {
  return {
      expect<ShapeError>(
          "normalized (3) for x (2, 4)",
          [f] {
            f(ones({2, 4}), {3}, Tensor(), Tensor(), 1e-5);
          },
          "layer_norm"),
      expect<ShapeError>(
          "weight (3) for (4)",
          [f] {
            f(ones({2, 4}), {4}, ones({3}), Tensor(), 1e-5);
          },
          "layer_norm"),
      expect<DTypeError>(
          "float64 bias",
          [f] {
            f(ones({2, 4}), {4}, Tensor(), ones({4}, kFloat64), 1e-5);
          },
          "layer_norm"),
      expect<DTypeError>(
          "int64 x", [f] { f(arange(4), {4}, Tensor(), Tensor(), 1e-5); }, "layer_norm"),
      expect<ValueError>(
          "eps -1",
          [f] {
            f(ones({2, 4}), {4}, Tensor(), Tensor(), -1);
          },
          "layer_norm"),
  };
}

}  // namespace

std::vector<OpInfo> nn_ops() {
  std::vector<OpInfo> t;
  t.push_back(entry("matmul", matmul_samples, [] {
    return std::vector<ErrorInput>{
        expect<ShapeError>("(2, 3) x (4, 2)",
                           [] {
                             matmul(ones({2, 3}), ones({4, 2}));
                           }),
        expect<ShapeError>("0-d operand", [] { matmul(ones({}), ones({2})); }),
        expect<DTypeError>("float32 x float64",
                           [] {
                             matmul(ones({2, 2}), ones({2, 2}, kFloat64));
                           }),
        expect<DTypeError>("int64",
                           [] {
                             matmul(arange(4).reshape({2, 2}), arange(4).reshape({2, 2}));
                           }),
        expect<ShapeError>("batch 2 vs 3",
                           [] {
                             matmul(ones({2, 2, 3}), ones({3, 3, 2}));
                           }),
    };
  }));
  t.back().float32 = {1e-5, 1e-5};
  // A layout that flips BLAS's transpose flag (a contiguous b is read as b^T in place, a strided
  // one is copied) makes OpenBLAS pick another kernel, which sums the K products (and the batch,
  // for a broadcast operand's gradient: 256 terms here) in another order: within 256 eps.
  t.back().layouts = {3e-5, 1e-5};
  t.back().note = "BLAS kernels differ per transpose flag: layouts agree within 256 eps (float32)";
  t.push_back(entry(
      "linear",
      [] { return linear_samples([](auto& x, auto& w, auto& b) { return linear(x, w, b); }); },
      [] {
        return linear_errors("linear", [](Tensor x, Tensor w, Tensor b) { linear(x, w, b); });
      }));
  t.back().layouts = kGemmLayouts;
  t.back().note = kGemmLayoutsNote;
  for (auto [name, fused] :
       {std::pair{"linear_activation", true}, std::pair{"linear_activation_composite", false}}) {
    t.push_back(entry(
        name,
        [fused = fused] {
          std::vector<Sample> s;
          for (auto [act, tag] : {std::pair{LinearActivation::ReLU, "relu: "},
                                  std::pair{LinearActivation::GELU, "gelu: "},
                                  std::pair{LinearActivation::GELUTanh, "gelu tanh: "}})
            for (Sample& x : [&] {
                   auto l = linear_samples([fused, act = act](auto& x, auto& w, auto& b) {
                     return fused ? linear_activation(x, w, b, act)
                                  : linear_activation_composite(x, w, b, act);
                   });
                   return act == LinearActivation::ReLU ? l : without_big(l);
                 }()) {
              x.name = tag + x.name;
              // ReLU's kink: the second derivative is not smooth where a pre-activation is 0.
              if (act == LinearActivation::ReLU) x.gradgradcheck = false;
              s.push_back(std::move(x));
            }
          return s;
        },
        [fused = fused, n = std::string(name)] {
          return linear_errors(n, [fused](Tensor x, Tensor w, Tensor b) {
            fused ? linear_activation(x, w, b, LinearActivation::GELU)
                  : linear_activation_composite(x, w, b, LinearActivation::GELU);
          });
        }));
    t.back().layouts = kGemmLayouts;
    t.back().note = kGemmLayoutsNote;
  }
  for (auto [name, f] :
       {std::pair<const char*, LnFn>{"layer_norm", layer_norm},
        std::pair<const char*, LnFn>{"layer_norm_composite", layer_norm_composite}}) {
    t.push_back(entry(
        name, [f = f] { return layer_norm_samples(f); }, [f = f] { return layer_norm_errors(f); }));
    t.back().float32 = {1e-4, 1e-4};  // the 1e4-offset rows lose digits in float32
  }
  {
    OpInfo d;
    d.name = "dropout";
    d.samples = [] {
      // A fresh generator per call: the same mask on every evaluation, as gradcheck needs.
      auto drop = [](double p, bool training) {
        return [p, training](const std::vector<Tensor>& v) {
          Generator gen(42);
          return dropout(v[0], p, training, gen);
        };
      };
      OpFn with_default = [](const std::vector<Tensor>& v) {
        manual_seed(7);
        return dropout(v[0], 0.3);
      };
      auto s = unary_samples(drop(0.5, true), {}, true);
      s.push_back(sample("p = 0 (identity)", {arg({2, 3})}, drop(0.0, true)));
      s.push_back(sample("p = 1 (zeros)", {arg({2, 3})}, drop(1.0, true)));
      s.push_back(sample("p = 0.1", {arg({4, 5})}, drop(0.1, true)));
      s.push_back(sample("eval mode", {transposed({3, 4})}, drop(0.5, false)));
      s.push_back(sample("default generator, reseeded", {arg({3, 4})}, with_default));
      return s;
    };
    d.errors = [] {
      return std::vector<ErrorInput>{
          expect<ValueError>("p = 1.5", [] { dropout(ones({2}), 1.5); }),
          expect<ValueError>("p = nan", [] { dropout(ones({2}), std::nan("")); }),
          expect<DTypeError>("int64", [] { dropout(arange(2), 0.5); }),
      };
    };
    t.push_back(d);
  }
  return t;
}

}  // namespace nabla::op_db
