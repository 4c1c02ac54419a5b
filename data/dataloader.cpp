#include "nabla/data/dataloader.h"

#include <fmt/format.h>

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

std::vector<int64_t> shard_indices(const std::vector<int64_t>& order, int64_t begin,
                                   int64_t batch_size, int64_t rank, int64_t world_size) {
  const auto n = static_cast<int64_t>(order.size());
  int64_t share = batch_size;
  if (n - begin < batch_size * world_size) {  // the tail: equal shares, padded at the end
    share = (n - begin + world_size - 1) / world_size;
  }
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(share));
  for (int64_t p = begin + rank * share; p < begin + (rank + 1) * share; ++p)
    indices.push_back(order[static_cast<size_t>(p < n ? p : (p - n) % n)]);  // pad from the start
  return indices;
}

void check_loader_options(int64_t n, int64_t batch_size, int64_t rank, int64_t world_size) {
  if (n < 0) throw ValueError(fmt::format("DataLoader: the data set size must be >= 0, got {}", n));
  if (batch_size <= 0)
    throw ValueError(fmt::format("DataLoader: batch_size must be positive, got {}", batch_size));
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw ValueError(
        fmt::format("DataLoader: rank {} of world_size {}; world_size must be >= 1 and rank in "
                    "[0, world_size)",
                    rank, world_size));
}

int64_t loader_restore_sample(const LoaderCursor& c, int64_t n, int64_t batches_per_epoch,
                              int64_t global_batch_size) {
  if (c.epoch < 0 || c.batch < 0)
    throw ValueError(fmt::format("DataLoader::restore: epoch {} and batch {}; both must be >= 0",
                                 c.epoch, c.batch));
  if (c.sample < 0) {  // {epoch, batch}: whole global batches of this loader
    if (c.batch > batches_per_epoch)
      throw ValueError(
          fmt::format("DataLoader::restore: batch {} but an epoch has {} batches of {} (n = {}); "
                      "a cursor from another data set or batch size?",
                      c.batch, batches_per_epoch, global_batch_size, n));
    return c.batch == batches_per_epoch ? n : c.batch * global_batch_size;
  }
  if (c.sample > n)
    throw ValueError(fmt::format(
        "DataLoader::restore: sample {} is past the epoch's {} samples; a cursor from another "
        "data set?",
        c.sample, n));
  return c.sample;
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
