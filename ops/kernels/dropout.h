// dropout's tuned kernels (the reference is the per-element loop in ops/dropout.cpp; both give
// the same mask and values, bit for bit).
// The forward draws the Philox words of each piece of 1024 elements with Generator::blocks, which
// runs many counters in SIMD lanes (16 per AVX-512 register), into a buffer that stays in L1; the
// backward reads the bool mask as bytes, so that GCC vectorises it. Measured on 1M float32
// elements, 2 threads: one block() per element 5.2 ms; four words per block 2.2 ms; blocks() and
// the vectorised loops, fwd 0.38 ms, fwd+bwd 0.58 ms (AMD EPYC host, commit 5a3469f); on the
// Intel Xeon host (AVX-512) the AVX-512 Philox took the forward from 0.69 to 0.38 ms (486dd55).
#pragma once
#include <cstdint>

#include "nabla/core/generator.h"

namespace nabla::kernels {

// y[i] = keep[i] ? x[i] * scale : 0 with keep[i] = (word i % 4 of block first + i / 4 of gen)
// >= threshold, for n contiguous elements, split across threads.
template <class T>
void dropout_forward(const Generator& gen, uint64_t first, uint64_t threshold, T scale, const T* x,
                     T* y, bool* keep, int64_t n);

// grad_x[i] = keep[i] ? grad[i] * scale : 0 for n contiguous elements, split across threads.
template <class T>
void dropout_backward(const bool* keep, T scale, const T* grad, T* grad_x, int64_t n);

}  // namespace nabla::kernels
