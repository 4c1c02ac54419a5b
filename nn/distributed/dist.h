// nabla::dist: processes started by `mpirun -np N` and collectives on tensors between them, over
// MPI (OpenMPI; docs/distributed.md). The library target is nabla_dist (nabla::nabla_dist), built
// only when CMake finds MPI; code that must also build without it tests NABLA_HAS_DIST, which the
// target defines for its users.
//
// Every collective is a collective: all ranks call the same ones in the same order with tensors of
// the same dtype and shape. When they do not, the tensor collectives below say so (a small
// metadata allgather runs first unless NABLA_DIST_CHECK=0). Every wait polls MPI_Test against a
// deadline (NABLA_DIST_TIMEOUT seconds, default 300), so a dead or stuck peer ends in a DistError
// naming the collective instead of a hang; MPI's own errors come back as DistError too
// (MPI_ERRORS_RETURN on nabla's communicator).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nabla/core/error.h"
#include "nabla/core/tensor.h"

namespace nabla::dist {

// A collective failed, timed out, or the ranks disagree (shapes, dtypes, parameter lists).
struct DistError : Error {
  using Error::Error;
};

// MPI_Init_thread and MPI_Finalize, for the guard's lifetime. It asks for MPI_THREAD_MULTIPLE and
// needs at least MPI_THREAD_SERIALIZED: nabla's own MPI calls, from the caller's threads and from
// DDP's communication thread, hold one lock, so they never run concurrently; a user's own MPI
// calls may run beside them only when MPI provides MULTIPLE (mpi_thread_multiple()). One per
// process, made once; a second throws. If a collective failed, or the guard is destroyed while an
// exception unwinds, it calls MPI_Abort instead of MPI_Finalize: finalize would wait for the dead
// peer, abort makes mpirun end every rank.
class InitGuard {
 public:
  InitGuard();
  InitGuard(int* argc, char*** argv);
  ~InitGuard();
  InitGuard(const InitGuard&) = delete;
  InitGuard& operator=(const InitGuard&) = delete;
};

bool initialized();  // an InitGuard is alive
int rank();          // this process's rank; 0 when not initialized (a plain single process)
int world_size();    // 1 when not initialized
// MPI provides MPI_THREAD_MULTIPLE (false when not initialized).
bool mpi_thread_multiple();
// The deadline of every wait, in seconds: NABLA_DIST_TIMEOUT read at InitGuard, or the last
// set_timeout_seconds.
double timeout_seconds();
void set_timeout_seconds(double seconds);

enum class ReduceOp {
  Sum,  // bool: logical or; int64: wraps like the C++ sum
  Mean  // floating dtypes only: the sum divided by world_size()
};

// bfloat16 and float16 are reduced in float32: each rank widens exactly, the sum (and the mean's
// division) runs in float32, and the result is rounded once to the tensor's dtype.
// rank_order = true sums by an allgather and then rank 0 + rank 1 + ... in that order on every
// rank, so the result is bitwise fixed for a world size whatever algorithm MPI picks (MPI does not
// promise a reduction order); it moves world_size() times the data.

// In place: every rank's `t` becomes the reduction. Any dtype, any strides.
void all_reduce_(Tensor& t, ReduceOp op = ReduceOp::Sum, bool rank_order = false);
Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, bool rank_order = false);
// In place: every rank's `t` becomes root's.
void broadcast_(Tensor& t, int root = 0);
// Every rank's `t`, stacked: shape (world_size(), *t.shape()), rank order.
Tensor all_gather(const Tensor& t);
void barrier();

// A collective in flight. wait() finishes it (results written into the tensor it was started on)
// or throws DistError on an MPI error or at the deadline; test() progresses it without blocking
// and says whether wait() would return at once (it throws once the deadline, counted from the
// start, has passed). The destructor waits (errors are then only
// recorded: the InitGuard aborts). Move-only.
class Work {
 public:
  struct State;
  Work();
  explicit Work(std::unique_ptr<State> state);
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  ~Work();
  void wait();
  bool test();
  bool done() const;  // waited, or never started
  // Where wait() copies the result when it is not the buffer sent (internal use).
  void set_target(Tensor t);

 private:
  std::unique_ptr<State> state_;
};

// all_reduce_ started without waiting. `t` must stay alive and unread until wait(): its data
// becomes the reduction then.
Work all_reduce_async(Tensor t, ReduceOp op = ReduceOp::Sum, bool rank_order = false);

}  // namespace nabla::dist
