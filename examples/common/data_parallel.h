// Data-parallel training for the example trainers (issue 24; docs/distributed.md). The same
// program runs as one process or under `mpirun -np N`: then every rank trains the same model on
// its share of each global batch (DataLoader sharding, data/dataloader.h), DDP averages the
// gradients, and rank 0 alone prints, writes metrics, checkpoints and figures.
//
// Header-only on purpose: it compiles with and without nabla_dist (NABLA_HAS_DIST, defined by
// that target for the trainers that link it), while examples/common stays free of MPI. A plain
// run (no mpirun) never initialises MPI.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "examples/common/progress.h"
#include "nabla/nabla.h"
#ifdef NABLA_HAS_DIST
#include "nabla/nn/distributed/data_parallel.h"
#endif

namespace nabla::examples {

// The process count mpirun (OpenMPI) gave this process; 0 when it was not started by mpirun.
inline int mpirun_world_size() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size ? std::atoi(size) : 0;
}

// guarded_main, inside MPI when mpirun started the process. A run that fails on one rank ends
// every rank (the InitGuard, unwound, calls MPI_Abort) instead of leaving the others waiting in
// a collective until their deadline.
inline int distributed_main(int argc, char** argv, int (*run)(int, char**)) {
  if (mpirun_world_size() == 0) return guarded_main(argc, argv, run);
#ifdef NABLA_HAS_DIST
  struct Failed {};
  try {
    dist::InitGuard mpi(&argc, &argv);
    const int code = guarded_main(argc, argv, run);
    if (code != 0 && dist::world_size() > 1) throw Failed{};
    return code;
  } catch (const Failed&) {
    return 1;
  }
#else
  if (mpirun_world_size() > 1) {
    fmt::print(stderr,
               "error: started by mpirun with {} processes, but this build has no nabla_dist (MPI "
               "was not found at configure time: apt install libopenmpi-dev, then reconfigure)\n",
               mpirun_world_size());
    return 1;
  }
  return guarded_main(argc, argv, run);
#endif
}

// " world_size=N" for a RESULT line of a run on N > 1 processes ("" on one: unchanged).
class DataParallel;
inline std::string world_size_field(const DataParallel& dp);

// This process's place in the run and the data-parallel steps a trainer needs.
class DataParallel {
 public:
#ifdef NABLA_HAS_DIST
  DataParallel() : rank_(dist::rank()), world_(dist::world_size()) {}
#else
  DataParallel() = default;
#endif

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  bool writer() const { return rank_ == 0; }  // prints, writes files

  // The examples each process takes per step for a global batch of `global_batch`.
  int64_t per_rank_batch(int64_t global_batch) const {
    if (global_batch <= 0 || global_batch % world_ != 0)
      throw ValueError(fmt::format(
          "--global-batch {} must be a positive multiple of the {} processes (each takes "
          "global-batch / processes examples per step)",
          global_batch, world_));
    return global_batch / world_;
  }

  // With more than one process: DDP over the model (rank 0's weights to everyone, the parameter
  // lists checked alike). Call before the optimizer takes steps.
  void wrap(const std::shared_ptr<nn::Module>& model) {
#ifdef NABLA_HAS_DIST
    if (world_ > 1) ddp_ = std::make_unique<dist::DistributedDataParallel>(model);
#else
    (void)model;
#endif
  }

  // loss.backward(); with DDP, the gradients are then the mean over the ranks.
  void backward(const Tensor& loss) {
#ifdef NABLA_HAS_DIST
    if (ddp_) return ddp_->backward(loss);
#endif
    loss.backward();
  }

  // The mean of `value` over the ranks (the global batch's loss for the progress bar).
  double mean(double value) const {
#ifdef NABLA_HAS_DIST
    if (world_ > 1)
      return dist::all_reduce(full({1}, value, kFloat64), dist::ReduceOp::Mean).item<double>();
#endif
    return value;
  }

  // Ranks other than 0 draw dropout masks (and augmentations) from their own stream: the same
  // seed on every rank would give every shard the same masks. The offset is rank 0's, so a
  // resumed run (which restores rank 0's generator everywhere) keeps its streams apart too.
  void own_random_stream() const {
    if (rank_ == 0) return;
    Generator& g = default_generator();
    g.set_state(g.seed() + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank_), g.offset());
  }

  // The r-th of world_size near-equal contiguous blocks of a global batch, and the factor on
  // this rank's mean loss that makes the ranks' average the global batch's mean (n_r * W / n;
  // 1 when the batch divides evenly). A rank left without examples (n < W) gets the batch's first
  // with factor 0, so every rank still runs the same collectives.
  struct Share {
    std::vector<int64_t> ids;
    double loss_factor = 1;
  };
  Share share(const std::vector<int64_t>& global) const { return share_of(global, rank_, world_); }
  static Share share_of(const std::vector<int64_t>& global, int rank, int world) {
    const auto n = static_cast<int64_t>(global.size());
    if (n == 0) throw ValueError("DataParallel::share: an empty global batch");
    const int64_t begin = n * rank / world, end = n * (rank + 1) / world;
    if (begin == end) return {{global.front()}, 0.0};
    return {{global.begin() + begin, global.begin() + end},
            static_cast<double>((end - begin) * world) / static_cast<double>(n)};
  }

 private:
  int rank_ = 0, world_ = 1;
#ifdef NABLA_HAS_DIST
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
#endif
};

inline std::string world_size_field(const DataParallel& dp) {
  return dp.world_size() > 1 ? fmt::format(" world_size={}", dp.world_size()) : "";
}

}  // namespace nabla::examples
