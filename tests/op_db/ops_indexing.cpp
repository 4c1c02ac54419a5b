// op_db entries: embedding (ops/embedding.h) and the indexing ops (ops/indexing.h): duplicate
// indices (their gradients add up), 0-d and empty index tensors, padding rows, non-contiguous
// indices and sources.
#include "tests/op_db/op_db.h"

namespace nabla::op_db {
namespace {

using EmbFn = Tensor (*)(const Tensor&, const Tensor&, std::optional<int64_t>);

std::vector<Sample> embedding_samples(EmbFn f) {
  // Rows at padding_idx get no gradient by definition, so the output there is multiplied by 0:
  // finite differences then see the same function the gradient describes.
  auto emb = [f](std::optional<int64_t> pad) {
    return [f, pad](const std::vector<Tensor>& v) {
      Tensor y = f(v[0], v[1], pad);
      if (!pad) return y;
      const int64_t row = *pad < 0 ? *pad + v[0].size(0) : *pad;
      return mul(y, ne(v[1], static_cast<double>(row)).to(y.dtype()).unsqueeze(-1));
    };
  };
  return {
      sample("(5, 3) by (4) with duplicates", {arg({5, 3}), fixed(idx({1, 4, 1, 0}, {4}))},
             emb(std::nullopt)),
      sample("(5, 3) by (2, 3)", {arg({5, 3}), fixed(indices({2, 3}, 5))}, emb(std::nullopt)),
      sample("0-d index", {arg({5, 3}), fixed(idx({2}, {}))}, emb(std::nullopt)),
      sample("padding_idx 1", {arg({5, 3}), fixed(idx({1, 2, 1, 3}, {4}))}, emb(1)),
      sample("padding_idx -1", {arg({5, 3}), fixed(idx({4, 2}, {2}))}, emb(-1)),
      sample("no indices", {arg({5, 3}), fixed(idx({}, {0}))}, emb(std::nullopt)),
      sample("transposed weight", {transposed({5, 3}), fixed(indices({6}, 5))}, emb(std::nullopt)),
      sample("strided weight, transposed indices", {strided({5, 3}), fixed(indices({3, 2}, 5).t())},
             emb(std::nullopt)),
      big(sample("big (1000, 64) by (4096)", {arg({1000, 64}), fixed(indices({4096}, 1000))},
                 emb(std::nullopt))),
  };
}

std::vector<ErrorInput> embedding_errors(EmbFn f) {
  return {
      expect<IndexError>(
          "index 5 of 5 rows",
          [f] {
            f(ones({5, 3}), idx({0, 5}, {2}), std::nullopt);
          },
          "embedding"),
      expect<IndexError>(
          "index -1",
          [f] {
            f(ones({5, 3}), idx({-1}, {1}), std::nullopt);
          },
          "embedding"),
      expect<DTypeError>(
          "float indices",
          [f] {
            f(ones({5, 3}), ones({2}), std::nullopt);
          },
          "embedding"),
      expect<ShapeError>(
          "1-D weight", [f] { f(ones({5}), idx({0}, {1}), std::nullopt); }, "embedding"),
      expect<IndexError>(
          "padding_idx 5",
          [f] {
            f(ones({5, 3}), idx({0}, {1}), 5);
          },
          "embedding"),
  };
}

}  // namespace

std::vector<OpInfo> indexing_ops() {
  std::vector<OpInfo> t;
  for (auto [name, f] :
       {std::pair<const char*, EmbFn>{"embedding", embedding},
        std::pair<const char*, EmbFn>{"embedding_composite", embedding_composite}}) {
    t.push_back(entry(
        name, [f = f] { return embedding_samples(f); }, [f = f] { return embedding_errors(f); }));
  }
  t[t.size() - 2].twice_differentiable = false;  // the fused backward is a scatter kernel
  t[t.size() - 2].note =
      "EmbeddingBackward has no ops form; embedding_composite is the twice "
      "differentiable twin";
  t.push_back(entry(
      "index_select",
      [] {
        auto sel = [](int64_t dim) {
          return [dim](const std::vector<Tensor>& v) { return index_select(v[0], dim, v[1]); };
        };
        return std::vector<Sample>{
            sample("dim 0 with duplicates", {arg({4, 3}), fixed(idx({3, 0, 3}, {3}))}, sel(0)),
            sample("dim -1, 0-d index", {arg({4, 3}), fixed(idx({2}, {}))}, sel(-1)),
            sample("no indices", {arg({4, 3}), fixed(idx({}, {0}))}, sel(1)),
            sample("transposed x, strided index",
                   {transposed({4, 3}), fixed(indices({8}, 3).slice(0, 0, 8, 2))}, sel(1)),
            sample("expanded x", {expanded({1, 3}, {4, 3}), fixed(idx({1, 1}, {2}))}, sel(0)),
            sample("4-D dim 2", {arg({2, 1, 3, 2}), fixed(idx({2, 0}, {2}))}, sel(2)),
            big(sample("big dim 0", {arg({264, 512}), fixed(indices({300}, 264))}, sel(0))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<IndexError>("index 4 of size 4",
                               [] { index_select(ones({4}), 0, idx({4}, {1})); }),
            expect<DTypeError>("float index", [] { index_select(ones({4}), 0, ones({1})); }),
            expect<ShapeError>("2-D index",
                               [] {
                                 index_select(ones({4}), 0, idx({0, 1}, {1, 2}));
                               }),
            expect<ShapeError>("0-d x", [] { index_select(ones({}), 0, idx({0}, {1})); }),
        };
      }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64, kBool};
  t.push_back(entry(
      "index_add",
      [] {
        auto ia = [](int64_t dim) {
          return [dim](const std::vector<Tensor>& v) { return index_add(v[0], dim, v[1], v[2]); };
        };
        return std::vector<Sample>{
            sample("dim 0 with duplicates", {arg({4, 3}), fixed(idx({0, 2, 0}, {3})), arg({3, 3})},
                   ia(0)),
            sample("dim -1, 0-d index", {arg({4, 3}), fixed(idx({1}, {})), arg({4, 1})}, ia(-1)),
            sample("no indices", {arg({4, 3}), fixed(idx({}, {0})), arg({0, 3})}, ia(0)),
            sample("transposed x, strided src",
                   {transposed({4, 3}), fixed(idx({2, 2}, {2})), strided({4, 2})}, ia(1)),
            sample("expanded src",
                   {arg({2, 3}), fixed(idx({1, 0, 1}, {3})), expanded({1, 3}, {3, 3})}, ia(0)),
            big(sample("big dim 0", {arg({264, 512}), fixed(indices({100}, 264)), arg({100, 512})},
                       ia(0))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<IndexError>("index 4 of size 4",
                               [] { index_add(ones({4}), 0, idx({4}, {1}), ones({1})); }),
            expect<ShapeError>("src (2) for 1 index",
                               [] { index_add(ones({4}), 0, idx({1}, {1}), ones({2})); }),
            expect<DTypeError>("float64 src",
                               [] { index_add(ones({4}), 0, idx({1}, {1}), ones({1}, kFloat64)); }),
        };
      }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64};
  t.push_back(entry(
      "gather",
      [] {
        auto g = [](int64_t dim) {
          return [dim](const std::vector<Tensor>& v) { return gather(v[0], dim, v[1]); };
        };
        return std::vector<Sample>{
            sample("dim 1 with duplicates", {arg({3, 4}), fixed(idx({0, 0, 3, 1, 2, 2}, {3, 2}))},
                   g(1)),
            sample("dim 0, index smaller off dim", {arg({3, 4}), fixed(indices({2, 2}, 3))}, g(0)),
            sample("1-D", {arg({5}), fixed(idx({4, 0, 4}, {3}))}, g(0)),
            sample("0-d x and index", {arg({}), fixed(idx({0}, {}))}, g(0)),
            sample("empty index", {arg({3, 4}), fixed(idx({}, {3, 0}))}, g(1)),
            sample("transposed x and index", {transposed({3, 4}), fixed(indices({2, 3}, 4).t())},
                   g(1)),
            sample("expanded x, 3-D",
                   {expanded({2, 1, 4}, {2, 3, 4}), fixed(indices({2, 3, 2}, 4))}, g(2)),
            big(sample("big dim 1", {arg({264, 512}), fixed(indices({264, 512}, 512))}, g(1))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<IndexError>("index 4 of size 4",
                               [] {
                                 gather(ones({2, 4}), 1, idx({4, 0}, {2, 1}));
                               }),
            expect<ShapeError>("rank 1 index for 2-D x",
                               [] {
                                 gather(ones({2, 4}), 1, idx({0}, {1}));
                               }),
            expect<DTypeError>("float index",
                               [] {
                                 gather(ones({2, 4}), 1, ones({2, 1}));
                               }),
            expect<ShapeError>("dim 2 of 2-D",
                               [] {
                                 gather(ones({2, 4}), 2, idx({0, 0}, {2, 1}));
                               }),
        };
      }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64, kBool};
  t.push_back(entry(
      "scatter_add",
      [] {
        auto sa = [](int64_t dim) {
          return [dim](const std::vector<Tensor>& v) { return scatter_add(v[0], dim, v[1], v[2]); };
        };
        return std::vector<Sample>{
            sample("dim 1 with duplicates",
                   {arg({3, 4}), fixed(idx({0, 0, 3, 1, 2, 2}, {3, 2})), arg({3, 2})}, sa(1)),
            sample("dim 0, src larger than index",
                   {arg({3, 4}), fixed(indices({2, 2}, 3)), arg({3, 4})}, sa(0)),
            sample("0-d", {arg({}), fixed(idx({0}, {})), arg({})}, sa(0)),
            sample("empty index", {arg({3, 4}), fixed(idx({}, {3, 0})), arg({3, 2})}, sa(1)),
            sample("transposed x, strided src",
                   {transposed({3, 4}), fixed(indices({3, 2}, 4)), strided({3, 2})}, sa(1)),
            sample("expanded src, 3-D",
                   {arg({2, 3, 4}), fixed(indices({2, 3, 2}, 4)), expanded({2, 1, 2}, {2, 3, 2})},
                   sa(2)),
            big(sample("big dim 1",
                       {arg({264, 512}), fixed(indices({264, 256}, 512)), arg({264, 256})}, sa(1))),
        };
      },
      [] {
        return std::vector<ErrorInput>{
            expect<IndexError>("index 4 of size 4",
                               [] {
                                 scatter_add(ones({2, 4}), 1, idx({4, 0}, {2, 1}), ones({2, 1}));
                               }),
            expect<ShapeError>(
                "src smaller than index",
                [] {
                  scatter_add(ones({2, 4}), 1, idx({0, 0, 0, 0}, {2, 2}), ones({2, 1}));
                }),
            expect<DTypeError>(
                "float64 src",
                [] {
                  scatter_add(ones({2, 4}), 1, idx({0, 0}, {2, 1}), ones({2, 1}, kFloat64));
                }),
        };
      }));
  t.back().dtypes = {kFloat32, kFloat64, kInt64};
  return t;
}

}  // namespace nabla::op_db
