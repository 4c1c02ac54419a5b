// Generator: a counter-based random number generator (Philox-4x32-10). Element i of a draw is a
// pure function of (seed, offset + i), so kernels can fill tensors in parallel and a checkpoint
// only needs (seed, offset) to resume the exact stream.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>

#include "nabla/core/dtype.h"
#include "nabla/core/shape.h"

namespace nabla {

class Tensor;
class Generator;

namespace detail {
// Gradient checkpointing (core/grad_checkpoint.cpp) watches the draws on this thread while it
// records or replays a function, so dropout inside it replays the same counters.
struct GeneratorWatch;
extern constinit thread_local GeneratorWatch* generator_watch;  // null: nothing watches
void before_draw(Generator& gen);
void after_draw(const Generator& gen, uint64_t first, uint64_t n);
void forget_generator(const Generator& gen);
}  // namespace detail

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  ~Generator() {
    if (detail::generator_watch != nullptr) [[unlikely]]
      detail::forget_generator(*this);
  }
  Generator(const Generator& other) : seed_(other.seed_), offset_(other.offset()) {}
  Generator& operator=(const Generator& other) {
    set_state(other.seed_, other.offset());
    return *this;
  }

  void manual_seed(uint64_t seed) { set_state(seed, 0); }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_.load(std::memory_order_relaxed); }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_.store(offset, std::memory_order_relaxed);
  }
  // Reserves n counters and returns the first; the caller evaluates block(first + i). Atomic,
  // so threads drawing from one generator (the default one) never share counters: a plain
  // read-add-write lost 624 of 9600 counters with 4 threads (tests/threads/test_threads.cpp).
  // Seeding while another thread draws is still a race.
  uint64_t advance(uint64_t n) {
    detail::GeneratorWatch* const watch = detail::generator_watch;
    if (watch != nullptr) [[unlikely]]
      detail::before_draw(*this);
    const uint64_t first = offset_.fetch_add(n, std::memory_order_relaxed);
    if (watch != nullptr) [[unlikely]]
      detail::after_draw(*this, first, n);
    return first;
  }

  // Four independent 32-bit words for counter c.
  std::array<uint32_t, 4> block(uint64_t c) const;
  // n consecutive blocks at once, word by word: out[4 * i + w] = block(first + i)[w] for i < n
  // (counters wrap modulo 2^64 like block's). Counters run in SIMD lanes, so this vectorises where
  // a loop over block() cannot; it is the fast path for kernels that consume many blocks.
  void blocks(uint64_t first, int64_t n, uint32_t* out) const;
  // Uniform in [0, 1) with 53 random bits; standard normal (Box-Muller) for counter c.
  double uniform(uint64_t c) const;
  double normal(uint64_t c) const;
  uint64_t bits64(uint64_t c) const;

  // Tensors drawn from this generator (torch.empty(shape).uniform_(lo, hi, generator=g) and
  // .normal_(mean, std)): uniform in [lo, hi), normal with that mean and standard deviation.
  // rand and randn are these with (0, 1); one code path. Float dtypes; lo <= hi, std >= 0.
  Tensor uniform(const Shape& shape, double lo, double hi, DType dt = DType::Float32);
  Tensor normal(const Shape& shape, double mean, double std, DType dt = DType::Float32);

 private:
  uint64_t seed_;
  std::atomic<uint64_t> offset_{0};
};

// The process-wide default generator (seeded with 0 until manual_seed is called).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace nabla
