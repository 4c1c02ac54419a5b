// Internal to nn/distributed's .cpp files (includes mpi.h): the process's MPI state and the
// helpers every collective uses. Not installed for users: dist.h is the API.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>

#include "nabla/core/dtype.h"
#include "nabla/core/tensor.h"
#include "nabla/nn/distributed/dist.h"

namespace nabla::dist::mpi {

struct Context {
  bool initialized = false;
  bool owns_mpi = false;  // we called MPI_Init_thread, so we finalize
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int world = 1;
  double timeout = 300.0;
  bool check_metadata = true;
  bool broken = false;
  std::string broken_why;
};
extern Context ctx;

// Throws DistError unless an InitGuard is alive and no collective has failed.
void require_ready(const char* what);
// Marks the communicator unusable and throws DistError(message).
[[noreturn]] void fail(const std::string& message);
// MPI's return code as a DistError naming `what` (and marking the communicator unusable).
void check_rc(int rc, const std::string& what);
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
