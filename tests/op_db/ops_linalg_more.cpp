// op_db entries: ops/linalg_more.h (bmm baddbmm addmm outer cosine_similarity normalize),
// ops/einsum.h and ops/interpolate.h. The products run on BLAS, whose kernels differ per
// transpose flag: their layout and float32 tolerances are matmul's (tests/op_db/ops_nn.cpp).
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

OpInfo blas_entry(const std::string& name, std::function<std::vector<Sample>()> samples,
                  std::function<std::vector<ErrorInput>()> errors) {
  OpInfo op = entry(name, std::move(samples), std::move(errors));
  op.layouts = {3e-5, 1e-5};
  op.note = "BLAS kernels differ per transpose flag: layouts agree within 256 eps (float32)";
  return op;
}

OpFn einsum_fn(std::string eq) {
  return [eq](const std::vector<Tensor>& v) { return einsum(eq, v); };
}

OpFn interp(InterpolateOptions o) {
  return [o](const std::vector<Tensor>& v) { return interpolate(v[0], o); };
}

}  // namespace

std::vector<OpInfo> linalg_more_ops() {
  std::vector<OpInfo> t;
  t.push_back(blas_entry(
      "bmm",
      [] {
        OpFn f = binary_fn(bmm);
        return std::vector{
            sample("(2, 3, 4) @ (2, 4, 5)", {arg({2, 3, 4}), arg({2, 4, 5})}, f),
            sample("transposed @ strided", {transposed({2, 3, 4}), strided({2, 4, 5})}, f),
            sample("expanded batch", {expanded({1, 3, 4}, {2, 3, 4}), arg({2, 4, 2})}, f),
            sample("size-1 dims", {arg({1, 1, 1}), arg({1, 1, 1})}, f),
            sample("size-0 K", {arg({2, 3, 0}), arg({2, 0, 4})}, f),
            sample("size-0 batch", {arg({0, 3, 4}), arg({0, 4, 2})}, f),
            big(sample("big (4, 64, 64) @ (4, 64, 64)", {arg({4, 64, 64}), arg({4, 64, 64})}, f)),
        };
      },
      [] {
        return std::vector{expect<ShapeError>("2-D operands",
                                              [] {
                                                bmm(ones({2, 3}), ones({3, 2}));
                                              }),
                           expect<ShapeError>("batch 2 vs 3",
                                              [] {
                                                bmm(ones({2, 3, 4}), ones({3, 4, 2}));
                                              }),
                           expect<ShapeError>("K 4 vs 5",
                                              [] {
                                                bmm(ones({2, 3, 4}), ones({2, 5, 2}));
                                              }),
                           expect<DTypeError>("float32 and float64", [] {
                             bmm(ones({2, 3, 4}), ones({2, 4, 2}, kFloat64));
                           })};
      }));
  t.push_back(blas_entry(
      "baddbmm",
      [] {
        auto f = [](double beta, double alpha) {
          return [beta, alpha](const std::vector<Tensor>& v) {
            return baddbmm(v[0], v[1], v[2], beta, alpha);
          };
        };
        return std::vector{
            sample("full input", {arg({2, 3, 5}), arg({2, 3, 4}), arg({2, 4, 5})}, f(1, 1)),
            sample("broadcast input (3, 1), beta 0.5 alpha 2",
                   {arg({3, 1}), arg({2, 3, 4}), arg({2, 4, 5})}, f(0.5, 2)),
            sample("beta 0", {arg({5}), transposed({2, 3, 4}), arg({2, 4, 5})}, f(0, -1)),
            sample("size-0 K", {arg({2, 3, 5}), arg({2, 3, 0}), arg({2, 0, 5})}, f(1, 1)),
        };
      },
      [] {
        return std::vector{
            expect<ShapeError>("input (4) for (2, 3, 5)",
                               [] {
                                 baddbmm(ones({4}), ones({2, 3, 4}), ones({2, 4, 5}));
                               }),
            expect<ShapeError>("2-D batch1",
                               [] {
                                 baddbmm(ones({3, 5}), ones({3, 4}), ones({2, 4, 5}));
                               }),
            expect<DTypeError>("float64 input", [] {
              baddbmm(ones({5}, kFloat64), ones({2, 3, 4}), ones({2, 4, 5}));
            })};
      }));
  t.push_back(blas_entry(
      "addmm",
      [] {
        auto f = [](double beta, double alpha) {
          return [beta, alpha](const std::vector<Tensor>& v) {
            return addmm(v[0], v[1], v[2], beta, alpha);
          };
        };
        return std::vector{
            sample("bias (5)", {arg({5}), arg({3, 4}), arg({4, 5})}, f(1, 1)),
            sample("full input, beta -1.5 alpha 0.25",
                   {arg({3, 5}), transposed({3, 4}), strided({4, 5})}, f(-1.5, 0.25)),
            sample("0-d input, beta 0", {arg({}), arg({3, 4}), arg({4, 5})}, f(0, 1)),
            sample("size-1", {arg({1, 1}), arg({1, 1}), arg({1, 1})}, f(1, 1)),
            sample("size-0 rows", {arg({5}), arg({0, 4}), arg({4, 5})}, f(1, 1)),
            big(sample("big 64 x 64 x 64", {arg({64}), arg({64, 64}), arg({64, 64})}, f(1, 1))),
        };
      },
      [] {
        return std::vector{expect<ShapeError>("K 4 vs 3",
                                              [] {
                                                addmm(ones({5}), ones({3, 4}), ones({3, 5}));
                                              }),
                           expect<ShapeError>("input (3, 5, 1)",
                                              [] {
                                                addmm(ones({3, 5, 1}), ones({3, 4}), ones({4, 5}));
                                              }),
                           expect<ShapeError>("3-D mat1", [] {
                             addmm(ones({5}), ones({1, 3, 4}), ones({4, 5}));
                           })};
      }));
  t.push_back(entry(
      "outer",
      [] {
        OpFn f = binary_fn(outer);
        return std::vector{
            sample("(3) x (4)", {arg({3}), arg({4})}, f),
            sample("strided x expanded", {strided({3}), expanded({1}, {4})}, f),
            sample("size-1", {arg({1}), arg({1})}, f),
            sample("size-0", {arg({0}), arg({4})}, f),
            big(sample("big", {arg({512}), arg({512})}, f)),
        };
      },
      [] {
        return std::vector{
            expect<ShapeError>("2-D",
                               [] {
                                 outer(ones({2, 3}), ones({3}));
                               }),
            expect<DTypeError>("float32 and int64", [] { outer(ones({2}), ones({3}, kInt64)); })};
      }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64};
  t.push_back(blas_entry(
      "einsum",
      [] {
        return std::vector{
            sample("ij,jk->ik", {arg({3, 4}), arg({4, 2})}, einsum_fn("ij,jk->ik")),
            sample("bij,bjk->bik transposed", {transposed({2, 3, 4}), arg({2, 4, 5})},
                   einsum_fn("bij,bjk->bik")),
            sample("ij->ji strided", {strided({3, 4})}, einsum_fn("ij->ji")),
            sample("ijk->j", {arg({2, 3, 4})}, einsum_fn("ijk->j")),
            sample("i,j (implicit outer)", {arg({3}), arg({4})}, einsum_fn("i,j")),
            sample("i,i-> (dot)", {arg({5}), expanded({1}, {5})}, einsum_fn("i,i->")),
            sample("ii (trace)", {arg({4, 4})}, einsum_fn("ii")),
            sample("ii->i (diagonal)", {arg({4, 4})}, einsum_fn("ii->i")),
            sample("bhqd,bhkd->bhqk", {arg({2, 2, 3, 4}), arg({2, 2, 5, 4})},
                   einsum_fn("bhqd,bhkd->bhqk")),
            sample("...ij,...jk->...ik broadcast", {arg({2, 3, 3, 4}), arg({3, 4, 2})},
                   einsum_fn("...ij,...jk->...ik")),
            sample("ij,jk,kl->il", {arg({2, 3}), arg({3, 4}), arg({4, 5})},
                   einsum_fn("ij,jk,kl->il")),
            sample("size-1 label broadcast", {arg({1, 4}), arg({3, 4})}, einsum_fn("ij,ij->ij")),
            sample("size-0 contraction", {arg({3, 0}), arg({0, 2})}, einsum_fn("ij,jk->ik")),
            sample("0-d operand", {arg({}), arg({3})}, einsum_fn(",i->i")),
            big(sample("big ik,kj->ij 64 x 64 x 64", {arg({64, 64}), arg({64, 64})},
                       einsum_fn("ik,kj->ij"))),
        };
      },
      [] {
        return std::vector{expect<ValueError>("2 subscripts, 1 tensor",
                                              [] {
                                                einsum("ij,jk", {ones({2, 2})});
                                              }),
                           expect<ShapeError>("3 labels for 2-D",
                                              [] {
                                                einsum("ijk->i", {ones({2, 2})});
                                              }),
                           expect<ShapeError>("size 2 vs 3",
                                              [] {
                                                einsum("ij,jk", {ones({2, 2}), ones({3, 2})});
                                              }),
                           expect<ValueError>("output label in no operand",
                                              [] {
                                                einsum("ij->k", {ones({2, 2})});
                                              }),
                           expect<ValueError>("output label twice",
                                              [] {
                                                einsum("ij->ii", {ones({2, 2})});
                                              }),
                           expect<ValueError>("digit in subscripts",
                                              [] {
                                                einsum("i1->i", {ones({2, 2})});
                                              }),
                           expect<ValueError>("two ellipses",
                                              [] {
                                                einsum("......->", {ones({2, 2})});
                                              }),
                           expect<ShapeError>("diagonal of (2, 3)",
                                              [] {
                                                einsum("ii->i", {ones({2, 3})});
                                              }),
                           expect<DTypeError>("int64", [] { einsum("i->", {arange(3)}); })};
      }));
  t.push_back(entry(
      "cosine_similarity",
      [] {
        auto f = [](int64_t dim) {
          return [dim](const std::vector<Tensor>& v) { return cosine_similarity(v[0], v[1], dim); };
        };
        return std::vector{
            sample("(3, 4) dim 1", {arg({3, 4}), arg({3, 4})}, f(1)),
            sample("broadcast (2, 1, 5) x (3, 5) dim -1", {arg({2, 1, 5}), arg({3, 5})}, f(-1)),
            sample("transposed x strided, dim 0", {transposed({3, 4}), strided({3, 4})}, f(0)),
            sample("size-1", {arg({1, 1}), arg({1, 1})}, f(1)),
            sample("size-0 batch", {arg({0, 4}), arg({0, 4})}, f(1)),
            // torch's gradient there treats the clamp as the identity: a convention (checked
            // against torch in the parity test), not the derivative finite differences see.
            forward_only(sample("tiny vectors: clamped norm",
                                {arg({2, 3}, {1e-6, 2e-6}), arg({2, 3})}, f(1))),
            big(sample("big", {arg({264, 512}), arg({264, 512})}, f(1))),
        };
      },
      [] {
        return std::vector{expect<ShapeError>("(2, 3) and (4)",
                                              [] {
                                                cosine_similarity(ones({2, 3}), ones({4}));
                                              }),
                           expect<ShapeError>("dim 2 of 2-D",
                                              [] {
                                                cosine_similarity(ones({2, 3}), ones({2, 3}), 2);
                                              }),
                           expect<DTypeError>("float32 and float64", [] {
                             cosine_similarity(ones({2, 3}), ones({2, 3}, kFloat64));
                           })};
      }));
  t.push_back(entry(
      "normalize",
      [] {
        auto f = [](double p, int64_t dim) {
          return [p, dim](const std::vector<Tensor>& v) { return normalize(v[0], p, dim); };
        };
        return std::vector{
            sample("(3, 4) p 2 dim 1", {arg({3, 4})}, f(2, 1)),
            sample("p 1 dim 0", {arg({3, 4})}, f(1, 0)),
            sample("p 3 dim -1 3-D", {arg({2, 3, 4})}, f(3, -1)),
            sample("p inf transposed", {transposed({3, 4})}, f(INFINITY, 1)),
            sample("expanded", {expanded({3, 1}, {3, 4})}, f(2, 0)),
            sample("strided", {strided({3, 4})}, f(2.5, 1)),
            sample("size-1", {arg({1, 1})}, f(2, 1)),
            sample("size-0", {arg({0, 4})}, f(2, 1)),
            // A kink: at a zero vector the norm's gradient is 0 by convention (torch's).
            forward_only(sample("kink: zero row (eps clamp)",
                                {values({2, 3}, {0, 0, 0, 1, -2, 0.5})}, f(3, 1))),
            big(sample("big", {arg({264, 512})}, f(2, 1))),
        };
      },
      [] {
        return std::vector{expect<ValueError>("p 0",
                                              [] {
                                                normalize(ones({2, 3}), 0.0);
                                              }),
                           expect<ShapeError>("dim 1 of 1-D", [] { normalize(ones({3}), 2.0, 1); }),
                           expect<DTypeError>("int64", [] { normalize(arange(3), 2.0, 0); })};
      }));
  t.push_back(blas_entry(
      "interpolate",
      [] {
        const InterpolateOptions up{.size = {7, 3}, .mode = "bilinear"};
        return std::vector{
            sample("nearest to (7, 3)", {arg({2, 3, 4, 5})}, interp({.size = {7, 3}})),
            sample("nearest x2", {arg({1, 2, 3, 4})}, interp({.scale_factor = {2.0}})),
            sample("nearest (1.5, 0.7)", {transposed({1, 2, 4, 5})},
                   interp({.scale_factor = {1.5, 0.7}})),
            sample("bilinear to (7, 3)", {arg({2, 3, 4, 5})}, interp(up)),
            sample("bilinear align_corners", {strided({1, 2, 4, 5})},
                   interp({.size = {7, 3}, .mode = "bilinear", .align_corners = true})),
            sample("bilinear (2.5, 1.3)", {expanded({1, 2, 1, 5}, {1, 2, 4, 5})},
                   interp({.scale_factor = {2.5, 1.3}, .mode = "bilinear"})),
            sample("bilinear down to (2, 1)", {arg({1, 2, 4, 5})},
                   interp({.size = {2, 1}, .mode = "bilinear"})),
            sample("size-1 image", {arg({1, 1, 1, 1})},
                   interp({.size = {3, 2}, .mode = "bilinear", .align_corners = true})),
            sample("size-0 batch", {arg({0, 2, 3, 3})}, interp(up)),
            big(sample("big", {arg({2, 8, 32, 32})},
                       interp({.scale_factor = {2.0}, .mode = "bilinear"}))),
        };
      },
      [] {
        return std::vector{
            expect<ValueError>("mode bicubic",
                               [] {
                                 interpolate(ones({1, 1, 2, 2}), {.size = {3}, .mode = "bicubic"});
                               }),
            expect<ShapeError>("3-D input",
                               [] {
                                 interpolate(ones({1, 2, 2}), {.size = {3}});
                               }),
            expect<ValueError>(
                "size and scale_factor",
                [] {
                  interpolate(ones({1, 1, 2, 2}), {.size = {3}, .scale_factor = {2.0}});
                }),
            expect<ValueError>("neither size nor scale_factor",
                               [] {
                                 interpolate(ones({1, 1, 2, 2}), {});
                               }),
            expect<ValueError>(
                "align_corners with nearest",
                [] {
                  interpolate(ones({1, 1, 2, 2}), {.size = {3}, .align_corners = false});
                }),
            expect<ShapeError>("output size 0",
                               [] {
                                 interpolate(ones({1, 1, 2, 2}), {.scale_factor = {0.4}});
                               }),
            expect<ValueError>("negative factor", [] {
              interpolate(ones({1, 1, 2, 2}), {.scale_factor = {-2.0}});
            })};
      }));
  return t;
}

}  // namespace nabla::op_db
