// Constants the kernels share.
#pragma once
#include <limits>

namespace nabla {

// -inf in T: the max of an empty row, and a masked logit.
template <class T>
inline constexpr T kNegInf = -std::numeric_limits<T>::infinity();

}  // namespace nabla
