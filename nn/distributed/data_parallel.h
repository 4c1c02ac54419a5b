// DistributedDataParallel: PyTorch's DDP over nabla::dist (docs/distributed.md). Each rank runs
// the same model on its own shard of the batch; the wrapper makes the gradients the mean over the
// ranks, so every rank's optimizer takes the same step as one process on the whole batch.
//
//   dist::InitGuard mpi(&argc, &argv);
//   auto model = std::make_shared<MyModel>(...);           // same configuration on every rank
//   dist::DistributedDataParallel ddp(model);               // rank 0's weights go to everyone
//   for (...) {
//     Tensor loss = cross_entropy((*model)(x_shard), y_shard);
//     optimizer.zero_grad();
//     ddp.backward(loss);          // = loss.backward(); ddp.finish();
//     optimizer.step();
//   }
//
// Construction broadcasts the parameters and buffers from rank 0 and checks that every rank has
// the same parameter and buffer list (names, dtypes, shapes): a mismatch throws DistError naming
// the first differing entry and the ranks. Gradients are put in buckets of about bucket_bytes in
// reverse registration order (the order backward produces them, as PyTorch's Reducer); a hook on
// each parameter's gradient marks it ready, and when a bucket is complete it goes to DDP's
// communication thread, which runs its all-reduce while backward goes on. Buckets start in index
// order on every rank (a bucket that completes early waits for the ones before it), so all ranks
// issue the same collectives in the same order. finish() (called by backward()) hands over any
// bucket still waiting (a parameter that got no gradient contributes its .grad or zeros), waits
// for all of them, writes the mean into each .grad and broadcasts the buffers from rank 0. Until
// finish() the .grad of a synchronised parameter holds the local sum only; a second backward
// before finish() throws. An error on the communication thread (a timed-out peer, an MPI error)
// is rethrown by finish().
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"
#include "nabla/nn/distributed/dist.h"
#include "nabla/nn/module.h"

namespace nabla::dist {

enum class GradReduction {
  Auto,       // float64 buckets in rank order (bitwise reproducible), the others by MPI
  RankOrder,  // every floating bucket by allgather + sum in rank order
  Mpi         // every bucket by MPI_Iallreduce (fastest; order chosen by MPI)
};

struct DataParallelOptions {
  int64_t bucket_bytes = int64_t{4} << 20;  // PyTorch's bucket_cap_mb = 25; 4 MiB here (issue 24)
  GradReduction reduction = GradReduction::Auto;
  int root = 0;  // the rank whose initial parameters and buffers everyone starts from
  // true: the buckets' all-reduces run on a background thread that overlaps them with backward.
  // false: the gradient hooks start them and poll MPI. Unset (default): the thread only when the
  // process may run on more cores than its compute threads (comm_thread_by_default()): with one
  // rank per core and one thread each (mpirun's binding on a 2-core machine) the thread takes
  // cycles from backward and measured slower than polling (docs/distributed.md).
  // NABLA_DDP_COMM_THREAD=0 or 1 in the environment overrides this.
  std::optional<bool> comm_thread = std::nullopt;
  // PyTorch's broadcast_buffers: every synchronised finish() ends by copying root's buffers
  // (BatchNorm's running statistics, ...) to every rank, so each forward starts from root's.
  bool broadcast_buffers = true;
};

// The default of DataParallelOptions::comm_thread: allowed cores > nabla's threads.
bool comm_thread_by_default();

class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                   DataParallelOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() const { return *module_; }

  // loss.backward(), then finish().
  void backward(const Tensor& loss);
  // Starts the buckets not started yet, waits for every bucket and writes the mean gradients into
  // the parameters' .grad. Does nothing when no backward ran since the last finish().
  void finish();
  // True between a synchronised backward's first gradient and finish().
  bool sync_pending() const;
  // Root's buffers to every rank now, in one message (finish() does it when broadcast_buffers is
  // on). Every rank must call it.
  void broadcast_buffers();
  bool uses_comm_thread() const;

  // While a NoSync lives, backward only accumulates into .grad locally (gradient accumulation);
  // the first backward after it ends all-reduces the accumulated sums.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }

  struct BucketInfo {
    DType dtype;
    std::vector<std::string> parameters;  // dotted names, in the bucket's order
    int64_t bytes;                        // of the gradients (16-bit ones travel as float32)
  };
  std::vector<BucketInfo> buckets() const;

  // How far this backward's buckets have got, in bucket index order; all 0 before its first
  // gradient and after finish(). For tests and diagnostics: a gradient hook on the first layer
  // (whose gradient comes last) that sees launched > 0 shows communication began during backward
  // (tests/dist/test_data_parallel.cpp). Read it on the thread that runs backward.
  struct BucketProgress {
    size_t launched = 0;   // handed over: to MPI by a hook, or to the communication thread
    size_t started = 0;    // MPI's non-blocking call issued (polling: = launched)
    size_t completed = 0;  // all-reduce done, seen by an MPI_Test (the thread's or a hook's)
  };
  BucketProgress bucket_progress() const;

  struct State;  // the reducer, shared with the gradient hooks (they hold it weakly)

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<State> state_;
};

}  // namespace nabla::dist
