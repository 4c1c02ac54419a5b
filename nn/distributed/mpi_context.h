// Internal to nn/distributed's .cpp files (includes mpi.h): the process's MPI state and the
// helpers every collective uses. Not installed for users: dist.h is the API.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "nabla/core/dtype.h"
#include "nabla/core/tensor.h"
#include "nabla/nn/distributed/dist.h"

namespace nabla::dist::mpi {

struct Context {
  std::atomic<bool> initialized = false;
  bool owns_mpi = false;  // we called MPI_Init_thread, so we finalize
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int world = 1;
  int thread_level = MPI_THREAD_SINGLE;  // what MPI_Init_thread provided
  std::atomic<double> timeout = 300.0;
  bool check_metadata = true;
  std::atomic<bool> broken = false;
  std::string broken_why;  // written once, before `broken` turns true
  std::mutex broken_mutex;
  // Held around every MPI call nabla makes: DDP's communication thread and the caller's thread
  // both call MPI, and MPI_THREAD_SERIALIZED allows one thread inside MPI at a time.
  std::mutex mpi_mutex;
};
extern Context ctx;

// Throws DistError unless an InitGuard is alive and no collective has failed.
void require_ready(const char* what);
// Marks the communicator unusable and throws DistError(message).
[[noreturn]] void fail(const std::string& message);
// The deadline's DistError for `what` (marking the communicator unusable).
[[noreturn]] void fail_timeout(const std::string& what);
// MPI's return code as a DistError naming `what` (and marking the communicator unusable).
void check_rc(int rc, const std::string& what);
// One MPI call under ctx.mpi_mutex; its error as a DistError naming `what`.
template <class F>
void call(const std::string& what, F&& mpi_call) {
  int rc;
  {
    std::lock_guard<std::mutex> lock(ctx.mpi_mutex);
    rc = mpi_call();
  }
  check_rc(rc, what);
}
// Polls `req` until it completes or the deadline (NABLA_DIST_TIMEOUT) passes.
void wait_request(MPI_Request& req, const std::string& what);
// n as MPI's int count, or a DistError naming `what`.
int checked_count(int64_t n, const char* what);
// The dtype a tensor is reduced in: 16-bit floats widen to float32 (exact), the rest stay.
inline DType wire_dtype(DType dt) { return is_reduced_float(dt) ? kFloat32 : dt; }
MPI_Datatype mpi_type(DType dt);
inline MPI_Op mpi_op(DType dt) { return dt == DType::Bool ? MPI_LOR : MPI_SUM; }
// Element [0, ..., 0] of t, untyped.
char* raw_data(const Tensor& t);
inline const char* op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "mean"; }

}  // namespace nabla::dist::mpi
