// Inverted dropout with a reproducible, parallel mask from a counter-based Generator.
#pragma once
#include "nabla/core/generator.h"
#include "nabla/core/tensor.h"

namespace nabla {

// Zeroes each element with probability p and scales the rest by 1 / (1 - p). Identity (returns x
// itself) when p == 0 or !training; all zeros when p == 1. Element i of the mask uses counter
// first + i of gen, where first = gen.advance(numel): the same seed gives the same mask.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// The same with default_generator().
Tensor dropout(const Tensor& x, double p, bool training = true);

}  // namespace nabla
