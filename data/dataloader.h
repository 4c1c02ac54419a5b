// DataLoader: batches of indices over [0, n), shuffled per epoch from (seed, epoch) so any epoch
// can be recreated, with drop_last, a background thread that builds the next batch while the
// current one trains, a cursor a checkpoint can save and restore, and sharding over the ranks of
// a data-parallel run.
//
// Sharding (options rank, world_size; PyTorch's DistributedSampler is the model): every rank
// draws the same order (same seed), and global batch g is the next batch_size * world_size
// positions of it; rank r takes the r-th contiguous block of batch_size. Ranks r = 0..W-1 with
// batch B therefore see exactly one process's batch of W * B, split in W in order, and a
// data-parallel step equals that process's step.
//   drop_last: a tail shorter than a global batch is dropped, so every rank hands out the same
//     number of equal batches (what DDP needs; the dropped samples differ per epoch).
//   otherwise: the tail of t samples is padded to ceil(t / W) * W by repeating the epoch's first
//     positions (as DistributedSampler pads), then split in W equal blocks: the ranks still have
//     equal batch counts, and with W = 1 nothing is padded (the unsharded loader).
//
// The cursor is global: `sample` counts the positions of the epoch's order consumed by all ranks
// together, and batches are cut from that position on. A run saved with W processes resumes
// with any W' (and per-rank batch) at exactly the first unconsumed sample; no rounding. Only an
// epoch's end is special: once a rank has handed out its last batch the cursor says n (a
// dropped tail counts as consumed), so a resume with a smaller global batch does not train on it.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/core/generator.h"
#include "nabla/core/io/checkpoint.h"
#include "nabla/core/tensor.h"

namespace nabla::data {

// {epoch, batch, sample, world_size}; see io::LoaderPosition. restore() reads `sample` (global);
// `batch` is this rank's count, a restored position counting as ceil(sample / global batch). A
// cursor with sample -1 (the two-field form {epoch, batch}, and checkpoints written before
// sharding) means batch whole global batches of the restoring loader.
using LoaderCursor = io::LoaderPosition;

// The index order of one epoch: identity, or a Fisher-Yates shuffle drawn from Generator(seed)
// at counter offset epoch * n.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

// The positions of `order` (of length n) that rank `rank` of `world_size` takes for the global
// batch starting at position `begin`: batch_size of them, or a share of the padded tail (above).
std::vector<int64_t> shard_indices(const std::vector<int64_t>& order, int64_t begin,
                                   int64_t batch_size, int64_t rank, int64_t world_size);

// DataLoader's argument checks (ValueError naming the values), outside the template.
void check_loader_options(int64_t n, int64_t batch_size, int64_t rank, int64_t world_size);
// The sample a restored cursor points at, checked against the loader's n and batches.
int64_t loader_restore_sample(const LoaderCursor& c, int64_t n, int64_t batches_per_epoch,
                              int64_t global_batch_size);

template <class Batch>
class DataLoader {
 public:
  using MakeBatch = std::function<Batch(const std::vector<int64_t>& indices)>;

  struct Options {
    int64_t batch_size = 32;  // per rank
    bool shuffle = true;
    bool drop_last = false;
    uint64_t seed = 0;
    bool prefetch = true;
    int64_t rank = 0, world_size = 1;
  };

  DataLoader(int64_t n, Options opts, MakeBatch make_batch)
      : n_(n), opts_(opts), make_batch_(std::move(make_batch)) {
    check_loader_options(n_, opts_.batch_size, opts_.rank, opts_.world_size);
    start_epoch(0, 0);
    schedule();
  }
  ~DataLoader() { drain(); }
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches each rank hands out in a whole epoch (from sample 0).
  int64_t batches_per_epoch() const { return batches_from(0); }
  int64_t global_batch_size() const { return opts_.batch_size * opts_.world_size; }

  // Where this rank stands; `sample` is the same on every rank.
  LoaderCursor cursor() const {
    const int64_t done = start_ + batch_ * global_batch_size();
    const bool finished = batch_ >= batches_;
    return {epoch_, batch_ + ceil_div(start_, global_batch_size()),
            finished ? n_ : std::min(n_, done), opts_.world_size};
  }

  // Resumes where a saved cursor points: the next batch starts at c.sample of epoch c.epoch,
  // whatever world size or batch size saved it.
  void restore(LoaderCursor c) {
    start_epoch(c.epoch, restored_sample(c));
    schedule();
  }

  // The next batch of the current epoch, or nullopt at its end (then call next_epoch()).
  std::optional<Batch> next() {
    if (batch_ >= batches_) return std::nullopt;
    Batch b = pending_.valid() ? pending_.get() : make_batch_(indices_of(batch_));
    ++batch_;
    schedule();
    return b;
  }

  void next_epoch() {
    start_epoch(epoch_ + 1, 0);
    schedule();
  }

 private:
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
  int64_t restored_sample(const LoaderCursor& c) const {
    return loader_restore_sample(c, n_, batches_per_epoch(), global_batch_size());
  }

  // Batches per rank from sample `start` to the epoch's end.
  int64_t batches_from(int64_t start) const {
    const int64_t left = n_ - start, g = global_batch_size();
    return opts_.drop_last ? left / g : ceil_div(left, g);
  }

  void start_epoch(int64_t epoch, int64_t start) {
    drain();
    epoch_ = epoch;
    start_ = start;
    batch_ = 0;
    batches_ = batches_from(start);
    order_ = epoch_order(n_, opts_.shuffle, opts_.seed, epoch);
  }

  std::vector<int64_t> indices_of(int64_t batch) const {
    return shard_indices(order_, start_ + batch * global_batch_size(), opts_.batch_size, opts_.rank,
                         opts_.world_size);
  }

  void schedule() {
    drain();
    if (!opts_.prefetch || batch_ >= batches_) return;
    pending_ = std::async(std::launch::async,
                          [this, idx = indices_of(batch_)] { return make_batch_(idx); });
  }

  void drain() {
    if (pending_.valid()) pending_.wait();
    pending_ = {};
  }

  int64_t n_;
  Options opts_;
  MakeBatch make_batch_;
  int64_t epoch_ = 0;
  int64_t start_ = 0;    // the sample this epoch's batches are cut from (0, or a restored cursor's)
  int64_t batch_ = 0;    // batches handed out since start_
  int64_t batches_ = 0;  // batches from start_ to the epoch's end
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
