#include "nabla/data/dataloader.h"

#include <algorithm>
#include <numeric>

namespace nabla::data {

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  Generator gen(seed);
  gen.set_state(seed, static_cast<uint64_t>(epoch) * static_cast<uint64_t>(n));
  const uint64_t base = gen.advance(static_cast<uint64_t>(n));
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(gen.bits64(base + static_cast<uint64_t>(i)) %
                                  static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

PaddedBatch pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id,
                          int64_t max_len) {
  int64_t T = 0;
  for (const auto& s : seqs) T = std::max<int64_t>(T, static_cast<int64_t>(s.size()));
  if (max_len > 0) T = std::min(T, max_len);
  const auto B = static_cast<int64_t>(seqs.size());
  PaddedBatch out{full({B, T}, static_cast<double>(pad_id), kInt64), empty({B}, kInt64),
                  empty({B, T}, kBool)};
  int64_t* tok = out.tokens.data_ptr<int64_t>();
  int64_t* len = out.valid_lens.data_ptr<int64_t>();
  bool* pad = out.key_padding_mask.data_ptr<bool>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = seqs[static_cast<size_t>(b)];
    const int64_t L = std::min<int64_t>(static_cast<int64_t>(s.size()), T);
    len[b] = L;
    for (int64_t t = 0; t < T; ++t) {
      if (t < L) tok[b * T + t] = s[static_cast<size_t>(t)];
      pad[b * T + t] = t >= L;
    }
  }
  return out;
}

}  // namespace nabla::data
