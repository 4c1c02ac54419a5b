// Arguments of the sliding-window ops (ops/conv.h, ops/pool.h), spelled as in PyTorch: an int
// for every spatial dim or one value per dim, and a convolution's padding, which may also be
// "same" or "valid".
#pragma once
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace nabla {

// An int for both spatial dims or an (h, w) pair, as PyTorch's int-or-tuple arguments:
// conv2d(x, w, b, 2) or conv2d(x, w, b, {2, 1}). Default-constructed it is unset: pooling's
// stride then defaults to the kernel size (PyTorch's stride=None).
struct Size2 {
  std::array<int64_t, 2> values{0, 0};
  bool given = false;

  Size2() = default;
  Size2(int64_t v) : values{v, v}, given(true) {}  // implicit on purpose: 2 means (2, 2)
  Size2(int64_t h, int64_t w) : values{h, w}, given(true) {}
  Size2(std::array<int64_t, 2> hw) : values(hw), given(true) {}
  int64_t operator[](size_t i) const { return values[i]; }
};

// A convolution's padding over N spatial dims: sizes (an int, or one per dim) or one of
// PyTorch's strings, "valid" (no padding) and "same" (the output as large as the input; stride 1
// only; an odd total goes to the end, as PyTorch does). Another string is refused by the op.
template <size_t N>
struct ConvPadding {
  std::array<int64_t, N> sizes{};
  std::string mode;  // empty when sizes are given

  template <std::integral I>  // any int, exactly: a literal 0 must not read as a null string
  ConvPadding(I p) {
    sizes.fill(static_cast<int64_t>(p));
  }
  ConvPadding(int64_t h, int64_t w) requires(N == 2) : sizes{h, w} {}
  ConvPadding(std::array<int64_t, N> s) : sizes(s) {}
  ConvPadding(const char* m) : mode(m ? m : "(null)") {}  // a null string is refused by the op
  ConvPadding(std::string m) : mode(std::move(m)) {}
};

}  // namespace nabla
