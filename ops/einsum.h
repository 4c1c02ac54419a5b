// einsum (torch.einsum's equation language).
#pragma once
#include <string>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla {

// Sums products of the operands' elements as the equation says, e.g. "bij,bjk->bik" (batched
// matmul), "ij->ji", "i,j->ij", "ii->i" (diagonal), "...ij,...jk->...ik". Labels are letters;
// one "..." per operand stands for its remaining leading dims, broadcast across operands. Without
// "->" the output is "..." then the labels used once, in alphabetical order (uppercase first).
// A label's sizes must agree across operands or be 1 (broadcast). float32 and float64.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace nabla
