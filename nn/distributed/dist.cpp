// nabla::dist over MPI (dist.h). One communicator, a duplicate of MPI_COMM_WORLD with
// MPI_ERRORS_RETURN, so nabla's collectives never match a user's own MPI calls and MPI's errors
// come back as return codes. Every collective is the non-blocking MPI call followed by a
// polling wait with a deadline (MPI 3.1, section 5.12: MPI_Iallreduce, MPI_Ibcast,
// MPI_Iallgather, MPI_Ibarrier); a blocking MPI call could hang forever on a stopped peer.
#include "nabla/nn/distributed/dist.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/dtype.h"
#include "nabla/core/shape.h"
#include "nabla/nn/distributed/dist_detail.h"
#include "nabla/nn/distributed/mpi_context.h"

namespace nabla::dist {
namespace mpi {

Context ctx;

namespace {
double env_timeout() {
  const char* v = std::getenv("NABLA_DIST_TIMEOUT");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (*end != '\0' || !(t > 0))
    throw ValueError(fmt::format(
        "dist::InitGuard: NABLA_DIST_TIMEOUT='{}' is not a positive number of seconds", v));
  return t;
}

}  // namespace

void require_ready(const char* what) {
  if (!ctx.initialized)
    throw DistError(fmt::format(
        "dist::{}: nabla::dist is not initialized (make a dist::InitGuard in main first)", what));
  if (ctx.broken)
    throw DistError(
        fmt::format("dist::{}: the communicator is unusable after an earlier "
                    "failure: {}",
                    what, ctx.broken_why));
}

void fail(const std::string& message) {
  detail::mark_broken(message);
  throw DistError(message);
}

void check_rc(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  {
    std::lock_guard<std::mutex> lock(ctx.mpi_mutex);
    MPI_Error_string(rc, text, &len);
  }
  fail(fmt::format("dist::{}: MPI error on rank {} of {}: {}", what, ctx.rank, ctx.world,
                   std::string(text, static_cast<size_t>(len))));
}

void fail_timeout(const std::string& what) {
  fail(fmt::format(
      "dist::{}: timed out after {} s on rank {} of {} (NABLA_DIST_TIMEOUT): a peer rank "
      "died, hangs, or called a different collective",
      what, ctx.timeout.load(), ctx.rank, ctx.world));
}

// Polls `req` until it completes or the deadline passes. A short spin first (small messages
// complete in microseconds), then short sleeps so a waiting rank leaves the core to the others.
void wait_request(MPI_Request& req, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(ctx.timeout.load());
  for (int polls = 0;; ++polls) {
    int flag = 0;
    call(what, [&] { return MPI_Test(&req, &flag, MPI_STATUS_IGNORE); });
    if (flag) return;
    if (Clock::now() > deadline) fail_timeout(what);
    if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int checked_count(int64_t n, const char* what) {
  if (n > INT_MAX)
    throw DistError(
        fmt::format("dist::{}: {} elements exceed MPI's int count ({})", what, n, INT_MAX));
  return static_cast<int>(n);
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::Bool:
      return MPI_C_BOOL;
    default:
      throw DTypeError(fmt::format("dist: no MPI type for {}", dtype_name(dt)));
  }
}

// Element [0, ..., 0] of t, untyped.
char* raw_data(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) +
         t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace mpi

using namespace mpi;

namespace {

template <class T>
void sum_rows_in_rank_order(const Tensor& gathered, Tensor& out, bool mean) {
  const int64_t n = out.numel();
  const T* g = gathered.data_ptr<T>();
  T* o = out.data_ptr<T>();
  for (int64_t i = 0; i < n; ++i) o[i] = g[i];
  for (int r = 1; r < ctx.world; ++r) {
    const T* row = g + static_cast<int64_t>(r) * n;
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(o[i] + row[i]);
  }
  if (mean)
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(o[i] / static_cast<T>(ctx.world));
}

template <class T>
void divide_by_world(Tensor& buf) {
  T* p = buf.data_ptr<T>();
  for (int64_t i = 0; i < buf.numel(); ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(ctx.world));
}

}  // namespace

// --- Work ------------------------------------------------------------------------------------

struct Work::State {
  MPI_Request req = MPI_REQUEST_NULL;
  std::string what;
  Tensor target;    // the caller's tensor when it is not `buffer` itself: the result lands here
  Tensor buffer;    // contiguous, wire dtype: sent and (without rank order) received in place
  Tensor gathered;  // rank order: (world, n), what every rank sent
  ReduceOp op = ReduceOp::Sum;
  bool rank_order = false;
  bool done = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  void complete() {
    NoGradGuard no_grad;
    const bool mean = op == ReduceOp::Mean;
    if (rank_order) {
      if (buffer.dtype() == kFloat64)
        sum_rows_in_rank_order<double>(gathered, buffer, mean);
      else
        sum_rows_in_rank_order<float>(gathered, buffer, mean);
    } else if (mean) {
      if (buffer.dtype() == kFloat64)
        divide_by_world<double>(buffer);
      else
        divide_by_world<float>(buffer);
    }
    if (target.defined())
      target.detach().copy_(buffer);  // converts back to 16 bits, one rounding
    else
      buffer.storage()->bump_version();
    gathered = Tensor();
  }
};

Work::Work() = default;
Work::Work(std::unique_ptr<State> state) : state_(std::move(state)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    try {
      if (state_ && !state_->done) wait();
    } catch (const std::exception&) {  // recorded by mark_broken; the InitGuard aborts
    }
    state_ = std::move(other.state_);
  }
  return *this;
}
Work::~Work() {
  try {
    if (state_ && !state_->done) wait();
  } catch (const std::exception&) {  // recorded by mark_broken; the InitGuard aborts
  }
}

void Work::wait() {
  if (!state_ || state_->done) return;
  if (ctx.broken) {
    state_->done = true;  // the request is abandoned: MPI_Abort ends the job
    throw DistError(
        fmt::format("dist::{}: the communicator is unusable after an earlier "
                    "failure: {}",
                    state_->what, ctx.broken_why));
  }
  wait_request(state_->req, state_->what);
  state_->done = true;
  state_->complete();
}

bool Work::test() {
  if (!state_ || state_->done) return true;
  if (ctx.broken) return false;
  int flag = 0;
  call(state_->what, [&] { return MPI_Test(&state_->req, &flag, MPI_STATUS_IGNORE); });
  if (!flag) {
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - state_->started;
    if (waited.count() > ctx.timeout.load()) {
      state_->done = true;  // abandoned: the communicator is unusable now
      fail_timeout(state_->what);
    }
    return false;
  }
  state_->done = true;
  state_->complete();
  return true;
}

void Work::set_target(Tensor t) {
  if (state_) state_->target = std::move(t);
}

bool Work::done() const { return !state_ || state_->done; }

// --- init ------------------------------------------------------------------------------------

InitGuard::InitGuard() : InitGuard(nullptr, nullptr) {}

InitGuard::InitGuard(int* argc, char*** argv) {
  if (ctx.initialized)
    throw DistError("dist::InitGuard: already initialized (make one per process)");
  const double timeout = env_timeout();  // a bad value is refused before MPI starts
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw DistError(
        "dist::InitGuard: MPI was finalized already and cannot start again (make one "
        "InitGuard for the whole program, in main)");
  int already = 0;
  MPI_Initialized(&already);
  int provided = MPI_THREAD_SINGLE;
  if (already) {
    MPI_Query_thread(&provided);
  } else {
    // MULTIPLE when MPI has it, so a user's own MPI calls may run beside DDP's communication
    // thread; nabla's own calls are serialised by ctx.mpi_mutex either way.
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw DistError("dist::InitGuard: MPI_Init_thread failed");
    ctx.owns_mpi = true;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (ctx.owns_mpi) MPI_Finalize();
    ctx.owns_mpi = false;
    throw DistError(
        fmt::format("dist::InitGuard: MPI provides thread level {}, nabla::dist "
                    "needs MPI_THREAD_SERIALIZED ({})",
                    provided, MPI_THREAD_SERIALIZED));
  }
  ctx.thread_level = provided;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &ctx.comm);
  MPI_Comm_set_errhandler(ctx.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ctx.comm, &ctx.rank);
  MPI_Comm_size(ctx.comm, &ctx.world);
  ctx.timeout = timeout;
  const char* check = std::getenv("NABLA_DIST_CHECK");
  ctx.check_metadata = !(check && std::string(check) == "0");
  ctx.broken_why.clear();
  ctx.broken = false;
  ctx.initialized = true;
}

InitGuard::~InitGuard() {
  const bool abort = ctx.broken || std::uncaught_exceptions() > 0;
  ctx.initialized = false;
  if (abort) {
    // Finalize would wait for a peer that is gone; abort makes mpirun end every rank.
    MPI_Abort(MPI_COMM_WORLD, 1);
    return;
  }
  MPI_Comm_free(&ctx.comm);
  if (ctx.owns_mpi) MPI_Finalize();
  ctx.owns_mpi = false;
}

bool initialized() { return ctx.initialized; }
int rank() { return ctx.initialized ? ctx.rank : 0; }
int world_size() { return ctx.initialized ? ctx.world : 1; }
bool mpi_thread_multiple() { return ctx.initialized && ctx.thread_level == MPI_THREAD_MULTIPLE; }
double timeout_seconds() { return ctx.timeout; }
void set_timeout_seconds(double seconds) {
  if (!(seconds > 0))
    throw ValueError(fmt::format("dist::set_timeout_seconds: {} is not positive", seconds));
  ctx.timeout = seconds;
}

namespace detail {

void mark_broken(const std::string& why) {
  std::lock_guard<std::mutex> lock(ctx.broken_mutex);
  if (ctx.broken) return;
  ctx.broken_why = why;
  ctx.broken = true;  // after the message: readers that see `broken` read a complete message
}

bool broken() { return ctx.broken; }

void broadcast_bytes(void* data, int64_t bytes, int root, const std::string& what) {
  require_ready(what.c_str());
  const int count = checked_count(bytes, what.c_str());
  MPI_Request req;
  call(what, [&] { return MPI_Ibcast(data, count, MPI_BYTE, root, ctx.comm, &req); });
  wait_request(req, what);
}

Work all_reduce_flat_async(Tensor flat, ReduceOp op, bool rank_order, std::string what) {
  require_ready(what.c_str());
  auto s = std::make_unique<Work::State>();
  s->what = std::move(what);
  s->buffer = flat;
  s->op = op;
  s->rank_order = rank_order && is_floating(flat.dtype());
  const int count = checked_count(flat.numel(), s->what.c_str());
  const MPI_Datatype type = mpi_type(flat.dtype());
  if (s->rank_order) {
    s->gathered = empty({ctx.world, flat.numel()}, flat.dtype());
    call(s->what, [&] {
      return MPI_Iallgather(raw_data(flat), count, type, raw_data(s->gathered), count, type,
                            ctx.comm, &s->req);
    });
  } else {
    call(s->what, [&] {
      return MPI_Iallreduce(MPI_IN_PLACE, raw_data(flat), count, type, mpi_op(flat.dtype()),
                            ctx.comm, &s->req);
    });
  }
  return Work(std::move(s));
}

std::vector<std::string> all_gather_bytes(const std::string& mine, const char* what) {
  require_ready(what);
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(static_cast<size_t>(ctx.world));
  MPI_Request req;
  call(what, [&] {
    return MPI_Iallgather(&len, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, ctx.comm, &req);
  });
  wait_request(req, what);
  std::vector<int> counts(lens.size()), displs(lens.size());
  int64_t total = 0;
  for (size_t r = 0; r < lens.size(); ++r) {
    counts[r] = checked_count(lens[r], what);
    displs[r] = checked_count(total, what);
    total += lens[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  call(what, [&] {
    return MPI_Iallgatherv(mine.data(), counts[static_cast<size_t>(ctx.rank)], MPI_CHAR, all.data(),
                           counts.data(), displs.data(), MPI_CHAR, ctx.comm, &req);
  });
  wait_request(req, what);
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(counts[r])));
  return out;
}

}  // namespace detail

}  // namespace nabla::dist
