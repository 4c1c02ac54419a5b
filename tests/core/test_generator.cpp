// Generator: Philox-4x32-10 against its published known answer, and the batched blocks() against
// block() one counter at a time, on each SIMD path the machine profile can pick.
#include <array>
#include <vector>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("Generator::block is Philox-4x32-10 (Random123 known answer)", "[core]") {
  // Random123's kat_vectors: philox4x32 10 rounds, counter 0 and key 0.
  const std::array<uint32_t, 4> expected = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
  CHECK(Generator(0).block(0) == expected);
}

TEST_CASE("Generator::blocks equals block for every counter, on every SIMD path", "[core]") {
  const uint64_t kTwo32 = uint64_t{1} << 32;
  // The machine profile picks the path (core/machine.h): portable, AVX2 (8 lanes), AVX-512 (16).
  for (machine::Isa isa : {machine::Isa::Generic, machine::Isa::Avx2, machine::Isa::Avx512}) {
    machine::ProfileGuard guard(isa);
    if (machine::profile().simd != isa) {
      WARN("this CPU has no " << machine::isa_name(isa) << ": that path is not tested here");
      continue;
    }
    // Seeds with high key bits; first counters at 0, just below 2^32 (the counter's high word
    // changes inside the batch) and just below 2^64 (the counter wraps to 0).
    for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x9E3779B97F4A7C15}}) {
      const Generator gen(seed);
      for (uint64_t first : {uint64_t{0}, uint64_t{1000}, kTwo32 - 37, kTwo32 - 5, 5 * kTwo32 - 3,
                             ~uint64_t{0} - 20}) {
        // Sizes around the vector widths (4, 8, 16 lanes, two groups of 8) and their remainders.
        for (int64_t n : {0, 1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 33, 100, 1000}) {
          INFO("path " << machine::isa_name(isa) << " seed " << seed << " first " << first << " n "
                       << n);
          std::vector<uint32_t> words(static_cast<size_t>(4 * n) + 1, 0xABCDABCDu);
          gen.blocks(first, n, words.data());
          bool all_equal = true;
          for (int64_t i = 0; i < n; ++i) {
            const std::array<uint32_t, 4> b = gen.block(first + static_cast<uint64_t>(i));
            for (size_t w = 0; w < 4; ++w)
              all_equal = all_equal && words[static_cast<size_t>(4 * i) + w] == b[w];
          }
          CHECK(all_equal);
          CHECK(words.back() == 0xABCDABCDu);  // nothing written past 4 n words
        }
      }
    }
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
