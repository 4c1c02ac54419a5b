// Internal to ops/kernels/onednn.cpp and onednn_int8.cpp (compiled with NABLA_WITH_ONEDNN=1):
// the one engine, the per-thread streams, the primitive cache and the thread count, shared by the
// bf16 and the int8 products. Not part of nabla's interface; empty in a build without oneDNN.
#pragma once
#if NABLA_WITH_ONEDNN
#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/ops/kernels/onednn.h"

namespace nabla::onednn::backend {

using dnnl::memory;
using dt = memory::data_type;

dnnl::engine& engine();
// Streams are not meant to be shared between threads; one per calling thread, on the one engine.
dnnl::stream& stream();

// Everything a primitive depends on, as numbers: kind, sizes, strides, flags, threads.
using Key = std::array<int64_t, 16>;
// A primitive and the weights layout it was made for (a packed int8 weight must match it).
struct Entry {
  dnnl::primitive prim;
  memory::desc weights;
  std::vector<float> scales;  // the output scales made into it (int8); a hit must match them
};

class PrimitiveCache {
 public:
  // The entry for `key` (its scales equal to `scales` when given), made by make() on a miss.
  template <class Make>
  Entry get(const Key& key, Make&& make, const std::vector<float>* scales = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first != key) continue;
      if (scales && it->second.scales != *scales) {  // a hash collision of the scales
        entries_.erase(it);
        break;
      }
      entries_.splice(entries_.begin(), entries_, it);  // most recently used first
      ++hits_;
      return entries_.front().second;
    }
    ++misses_;
    entries_.emplace_front(key, make());
    trim();
    return entries_.front().second;
  }
  CacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, misses_, static_cast<int64_t>(entries_.size()), capacity_};
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
    hits_ = misses_ = 0;
  }
  void set_capacity(int64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = n;
    trim();
  }

 private:
  void trim() {
    while (static_cast<int64_t>(entries_.size()) > capacity_) entries_.pop_back();
  }
  std::mutex mutex_;
  // A model has a few dozen distinct shapes; a linear search over this list costs far less than
  // the product it finds.
  std::list<std::pair<Key, Entry> > entries_;
  int64_t hits_ = 0, misses_ = 0, capacity_ = 512;
};
PrimitiveCache& cache();

// Throws ValueError naming `what` for a negative size or stride.
void check_sizes(const char* what, std::initializer_list<int64_t> sizes);

// oneDNN's OpenMP runtime splits a call over omp_get_max_threads(): make that nabla's active
// count (the one core free under load), or 1 in deterministic mode, and return it. Part of the
// key: some implementations fix their split when the primitive is made.
int prepare_threads();

// Runs f, turning a dnnl::error into a nabla::Error naming `what` and the operands.
template <class F>
void translate_errors(const char* what, const std::string& shapes, F&& f) {
  try {
    f();
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("{}: oneDNN failed on {}: {}", what, shapes, e.what()));
  }
}

// The oneDNN eltwise post-op of an activation (not None).
inline dnnl::algorithm eltwise_of(Activation a) {
  return a == Activation::ReLU   ? dnnl::algorithm::eltwise_relu
         : a == Activation::GELU ? dnnl::algorithm::eltwise_gelu_erf
                                 : dnnl::algorithm::eltwise_gelu_tanh;
}

inline memory::dims dims(std::initializer_list<int64_t> v) { return memory::dims(v); }

// The product (m x k) @ (n x k)^T must match the packed weight it is given.
inline void check_packed_weight(const char* what, int64_t m, int64_t n, int64_t k, int64_t w_n,
                                int64_t w_k) {
  if (n != w_n || k != w_k)
    throw ShapeError(
        fmt::format("{}: the product is ({} x {}) @ ({} x {})^T but the packed weight is {} x {}",
                    what, m, k, n, k, w_n, w_k));
}

// W^T (k x n) over a row-major n x k weight of this type, read in place; or format any, the
// layout the chosen kernel reads fastest (brgemm's blocked one), for a copy reordered once.
inline memory::desc linear_weights_md(int64_t n, int64_t k, dt type, bool packed) {
  return packed ? memory::desc(dims({k, n}), type, memory::format_tag::any)
                : memory::desc(dims({k, n}), type, dims({1, k}));
}

}  // namespace nabla::onednn::backend
#endif
