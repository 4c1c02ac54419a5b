// DataLoader: batches of indices over [0, n), shuffled per epoch from (seed, epoch) so any epoch
// can be recreated, with drop_last, a background thread that builds the next batch while the
// current one trains, and a cursor (epoch, batch) a checkpoint can save and restore.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/core/generator.h"
#include "nabla/core/tensor.h"

namespace nabla::data {

struct LoaderCursor {
  int64_t epoch = 0;
  int64_t batch = 0;  // batches already handed out in this epoch
};

// The index order of one epoch: identity, or a Fisher-Yates shuffle drawn from Generator(seed)
// at counter offset epoch * n.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

template <class Batch>
class DataLoader {
 public:
  using MakeBatch = std::function<Batch(const std::vector<int64_t>& indices)>;

  struct Options {
    int64_t batch_size = 32;
    bool shuffle = true;
    bool drop_last = false;
    uint64_t seed = 0;
    bool prefetch = true;
  };

  DataLoader(int64_t n, Options opts, MakeBatch make_batch)
      : n_(n), opts_(opts), make_batch_(std::move(make_batch)) {
    if (opts_.batch_size <= 0) throw ValueError("DataLoader: batch_size must be positive");
    start_epoch(0);
  }
  ~DataLoader() { drain(); }
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const {
    return opts_.drop_last ? n_ / opts_.batch_size : (n_ + opts_.batch_size - 1) / opts_.batch_size;
  }
  LoaderCursor cursor() const { return cursor_; }

  // Resumes exactly where a saved cursor points (the next batch returned is batch `c.batch`).
  void restore(LoaderCursor c) {
    start_epoch(c.epoch);
    cursor_.batch = std::min(c.batch, batches_per_epoch());
    schedule();
  }

  // The next batch of the current epoch, or nullopt at its end (then call next_epoch()).
  std::optional<Batch> next() {
    if (cursor_.batch >= batches_per_epoch()) return std::nullopt;
    Batch b = pending_.valid() ? pending_.get() : make_batch_(indices_of(cursor_.batch));
    ++cursor_.batch;
    schedule();
    return b;
  }

  void next_epoch() { start_epoch(cursor_.epoch + 1); }

 private:
  void start_epoch(int64_t epoch) {
    drain();
    cursor_ = {epoch, 0};
    order_ = epoch_order(n_, opts_.shuffle, opts_.seed, epoch);
    schedule();
  }

  std::vector<int64_t> indices_of(int64_t batch) const {
    const int64_t begin = batch * opts_.batch_size;
    const int64_t end = std::min(n_, begin + opts_.batch_size);
    return {order_.begin() + begin, order_.begin() + end};
  }

  void schedule() {
    drain();
    if (!opts_.prefetch || cursor_.batch >= batches_per_epoch()) return;
    pending_ = std::async(std::launch::async,
                          [this, idx = indices_of(cursor_.batch)] { return make_batch_(idx); });
  }

  void drain() {
    if (pending_.valid()) pending_.wait();
    pending_ = {};
  }

  int64_t n_;
  Options opts_;
  MakeBatch make_batch_;
  LoaderCursor cursor_;
  std::vector<int64_t> order_;
  std::future<Batch> pending_;
};

// Sequences of different lengths padded into one batch.
struct PaddedBatch {
  Tensor tokens;            // (B, T) int64, padded with pad_id
  Tensor valid_lens;        // (B,) int64
  Tensor key_padding_mask;  // (B, T) bool, true at padding (PyTorch's convention)
};
PaddedBatch pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id,
                          int64_t max_len = 0);

}  // namespace nabla::data
