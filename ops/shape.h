// Shape ops that copy: cat stack split chunk repeat repeat_interleave pad tril triu (PyTorch
// semantics). The pure views (view, reshape, permute, narrow, slice, ...) are Tensor methods.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

// Concatenates along dim; all shapes must agree except along dim (1-D empty tensors are skipped).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Stacks equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of split_size elements along dim (the last one may be shorter).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views of the given sizes along dim (they must sum to x.size(dim)). Note: split(x, {n}) with one
// braced size picks the split_size overload.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// At most `chunks` views of ceil(size / chunks) elements along dim.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// Tiles x: repeats[i] copies along dim i (like torch.Tensor.repeat; may add leading dims).
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
// Repeats each element `repeats` times along dim (flattened input if no dim), any dtype.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = {});
// Element i along dim repeated repeats[i] times; repeats is a 1-D int64 tensor (or 1 element).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = {});

// Constant padding, F.pad order: {left, right} of the last dim first, then the dim before, ...
// Negative pads crop.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0);

// Keeps elements on and below (tril) / above (triu) the diagonal of the last two dims, zeroes
// the rest; diagonal > 0 moves it up/right. Any dtype (bool masks too).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace nabla
