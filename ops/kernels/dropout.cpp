#include "nabla/ops/kernels/dropout.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "nabla/core/parallel.h"

namespace nabla::kernels {
namespace {

// n elements from their Philox words: keep iff word >= threshold; y = keep ? x * scale : 0.
// The threshold is ceil(p 2^32), 2^32 only for p = 1 (nothing kept); below that the comparison is
// made in 32 bits (against a 64-bit threshold each word was widened first). The product is
// computed for every element and kept or zeroed by a bit mask: `k ? x * scale : 0` is control
// flow to GCC, which AVX-512 turns into a masked multiply but AVX2 cannot, so at 8 lanes the loop
// did not vectorise at all (9.4 instructions per element in callgrind, -march=x86-64-v3 build).
// v if keep, else +0: the same bits as `keep ? v : T(0)`, without a branch.
template <class T>
T kept_or_zero(T v, bool keep) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  return std::bit_cast<T>(std::bit_cast<Bits>(v) & (Bits{0} - static_cast<Bits>(keep)));
}

template <class T>
void mask_piece(const uint32_t* words, const T* x, T* y, bool* keep, int64_t n, uint64_t threshold,
                T scale) {
  if (threshold > UINT32_MAX) {
    std::fill(keep, keep + n, false);
    std::fill(y, y + n, T(0));
    return;
  }
  const auto t = static_cast<uint32_t>(threshold);
  for (int64_t i = 0; i < n; ++i) {
    const bool k = words[i] >= t;
    keep[i] = k;
    y[i] = kept_or_zero(x[i] * scale, k);
  }
}

// grad_x = keep ? grad * scale : 0 over n elements. The mask is read as bytes (a bool is 0 or 1):
// GCC does not vectorise loads of bool. Zeroed by a bit mask, as above.
template <class T>
void backward_piece(const uint8_t* keep, const T* grad, T* grad_x, int64_t n, T scale) {
  for (int64_t i = 0; i < n; ++i) grad_x[i] = kept_or_zero(grad[i] * scale, keep[i] != 0);
}

}  // namespace

template <class T>
void dropout_forward(const Generator& gen, uint64_t first, uint64_t threshold, T scale, const T* x,
                     T* y, bool* keep, int64_t n) {
  parallel_for(n, 4, [&](int64_t b, int64_t e) {
    // The words of a piece of elements come from Generator::blocks (vectorised) into a buffer
    // that stays in L1; a piece starts on a block boundary, so words[i - start] is element i's.
    constexpr int64_t kPiece = 1024;
    alignas(64) uint32_t words[kPiece];
    for (int64_t start = b / 4 * 4; start < e; start += kPiece) {
      const int64_t end = std::min(e, start + kPiece);
      gen.blocks(first + static_cast<uint64_t>(start / 4), (end - start + 3) / 4, words);
      const int64_t from = std::max(b, start);
      mask_piece<T>(words + (from - start), x + from, y + from, keep + from, end - from, threshold,
                    scale);
    }
  });
}

template <class T>
void dropout_backward(const bool* keep, T scale, const T* grad, T* grad_x, int64_t n) {
  const auto* keep_bytes = reinterpret_cast<const uint8_t*>(keep);
  parallel_for(n, 1, [&](int64_t b, int64_t e) {
    backward_piece<T>(keep_bytes + b, grad + b, grad_x + b, e - b, scale);
  });
}

template void dropout_forward<float>(const Generator&, uint64_t, uint64_t, float, const float*,
                                     float*, bool*, int64_t);
template void dropout_forward<double>(const Generator&, uint64_t, uint64_t, double, const double*,
                                      double*, bool*, int64_t);
template void dropout_backward<float>(const bool*, float, const float*, float*, int64_t);
template void dropout_backward<double>(const bool*, double, const double*, double*, int64_t);

}  // namespace nabla::kernels
