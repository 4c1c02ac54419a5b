// Embedding: a fused row gather (forward) and row scatter-add (backward), plus its composite twin
// built from index_select, which tests/ops/test_embedding_patches.cpp checks it against.
#include "nabla/ops/embedding.h"

#include <fmt/format.h>

#include <algorithm>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/shape.h"

namespace nabla {
namespace {

// Columns per backward task: tasks own disjoint columns of grad_weight, so repeated indices
// accumulate without races.
constexpr int64_t kColumnBlock = 256;

// Validates the arguments; returns padding_idx normalised to [0, V), or -1 for none.
int64_t check_embedding(const char* op, const Tensor& weight, const Tensor& indices,
                        std::optional<int64_t> padding_idx) {
  if (weight.dim() != 2)
    throw ShapeError(
        fmt::format("{}: weight must be 2-D (V, D), got shape {}", op, shape_str(weight.shape())));
  if (!is_floating(weight.dtype()))
    throw DTypeError(fmt::format("{}: weight must be float32 or float64, got {}", op,
                                 dtype_name(weight.dtype())));
  if (indices.dtype() != kInt64)
    throw DTypeError(fmt::format("{}: indices must be int64, got {} (shape {})", op,
                                 dtype_name(indices.dtype()), shape_str(indices.shape())));
  const int64_t V = weight.size(0);
  if (!padding_idx) return -1;
  if (*padding_idx < -V || *padding_idx >= V)
    throw IndexError(fmt::format("{}: padding_idx {} is out of range for weight of shape {}", op,
                                 *padding_idx, shape_str(weight.shape())));
  return *padding_idx < 0 ? *padding_idx + V : *padding_idx;
}

std::vector<int64_t> checked_rows(const char* op, const Tensor& weight, const Tensor& indices) {
  std::vector<int64_t> idx = indices.to_vector<int64_t>();
  for (int64_t v : idx)
    if (v < 0 || v >= weight.size(0))
      throw IndexError(fmt::format("{}: index {} is out of range for dim 0 of size {} (weight {})",
                                   op, v, weight.size(0), shape_str(weight.shape())));
  return idx;
}

Shape output_shape(const Tensor& indices, int64_t D) {
  Shape out = indices.shape();
  out.push_back(D);
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// embedding
//   forward:   y[..., :] = weight[indices[...], :]        weight (V, D), indices (...) -> (..., D)
//   backward:  grad_weight[v, :] = sum of grad[p, :] over positions p with indices[p] = v, and 0
//              for v = padding_idx; a fused scatter-add kernel, not differentiable again
//              (embedding_composite is)      saves indices
struct EmbeddingBackward final : Node {
  SavedTensor indices{this, "indices"};
  int64_t num_rows, padding_idx;  // padding_idx -1: none
  EmbeddingBackward(int64_t v, int64_t p) : num_rows(v), padding_idx(p) {}
  bool backward_is_differentiable() const override { return false; }
  std::vector<Tensor> backward(const Tensor& grad) override {
    const std::vector<int64_t> idx = indices.get().to_vector<int64_t>();
    const auto N = static_cast<int64_t>(idx.size());
    const int64_t D = grad.size(-1);
    const Tensor g = grad.detach().contiguous();  // (N, D)
    Tensor grad_weight = zeros({num_rows, D}, grad.dtype());
    const int64_t blocks = (D + kColumnBlock - 1) / kColumnBlock;
    dispatch_float(grad.dtype(), "embedding", [&](auto tag) {
      using T = decltype(tag);
      const T* gp = g.data_ptr<T>();
      T* wp = grad_weight.data_ptr<T>();
      parallel_for(blocks, N * std::min(D, kColumnBlock), [&](int64_t b, int64_t e) {
        for (int64_t blk = b; blk < e; ++blk) {
          const int64_t c0 = blk * kColumnBlock, c1 = std::min(D, c0 + kColumnBlock);
          for (int64_t p = 0; p < N; ++p) {
            const int64_t v = idx[static_cast<size_t>(p)];
            if (v == padding_idx) continue;
            for (int64_t c = c0; c < c1; ++c) wp[v * D + c] += gp[p * D + c];
          }
        }
      });
    });
    return {grad_weight};
  }
  const char* name() const override { return "EmbeddingBackward"; }
};

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  inspect::OpScope op_scope("embedding", {&weight, &indices});
  const int64_t pad = check_embedding("embedding", weight, indices, padding_idx);
  const std::vector<int64_t> idx = checked_rows("embedding", weight, indices);
  const int64_t D = weight.size(1);
  Tensor y = empty(output_shape(indices, D), weight.dtype());
  const Tensor w = weight.detach().contiguous();
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* wp = w.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    parallel_for(static_cast<int64_t>(idx.size()), D, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const T* row = wp + idx[static_cast<size_t>(p)] * D;
        std::copy(row, row + D, yp + p * D);
      }
    });
  });
  if (auto node = make_node<EmbeddingBackward>({&weight}, weight.size(0), pad)) {
    node->indices.save(indices);
    set_history(y, node);
  }
  return y;
}

// ----------------------------------------------------------------------------
// embedding_composite: index_select of the flattened indices, reshaped to (..., D); the padding
// row is spliced in detached, so it receives no gradient.
Tensor embedding_composite(const Tensor& weight, const Tensor& indices,
                           std::optional<int64_t> padding_idx) {
  inspect::OpScope op_scope("embedding_composite", {&weight, &indices});
  const int64_t pad = check_embedding("embedding_composite", weight, indices, padding_idx);
  checked_rows("embedding_composite", weight, indices);
  Tensor w = weight;
  if (pad >= 0)
    w = cat({weight.narrow(0, 0, pad), weight.narrow(0, pad, 1).detach(),
             weight.narrow(0, pad + 1, weight.size(0) - pad - 1)});
  return index_select(w, 0, indices.reshape({-1})).reshape(output_shape(indices, weight.size(1)));
}

}  // namespace nabla
