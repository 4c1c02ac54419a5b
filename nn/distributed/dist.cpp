// nabla::dist over MPI (dist.h). One communicator, a duplicate of MPI_COMM_WORLD with
// MPI_ERRORS_RETURN, so nabla's collectives never match a user's own MPI calls and MPI's errors
// come back as return codes. Every collective is the non-blocking MPI call followed by a
// polling wait with a deadline (MPI 3.1, section 5.12: MPI_Iallreduce, MPI_Ibcast,
// MPI_Iallgather, MPI_Ibarrier); a blocking MPI call could hang forever on a stopped peer.
#include "nabla/nn/distributed/dist.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/dtype.h"
#include "nabla/core/shape.h"
#include "nabla/nn/distributed/dist_detail.h"

namespace nabla::dist {
namespace {

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
Context ctx;

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

[[noreturn]] void fail(const std::string& message) {
  detail::mark_broken(message);
  throw DistError(message);
}

void check_rc(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(fmt::format("dist::{}: MPI error on rank {} of {}: {}", what, ctx.rank, ctx.world,
                   std::string(text, static_cast<size_t>(len))));
}

// Polls `req` until it completes or the deadline passes. A short spin first (small messages
// complete in microseconds), then short sleeps so a waiting rank leaves the core to the others.
void wait_request(MPI_Request& req, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(ctx.timeout);
  for (int polls = 0;; ++polls) {
    int flag = 0;
    check_rc(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), what);
    if (flag) return;
    if (Clock::now() > deadline)
      fail(fmt::format(
          "dist::{}: timed out after {} s on rank {} of {} (NABLA_DIST_TIMEOUT): a peer rank "
          "died, hangs, or called a different collective",
          what, ctx.timeout, ctx.rank, ctx.world));
    if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int checked_count(int64_t n, const char* what) {
  if (n > INT_MAX)
    throw DistError(
        fmt::format("dist::{}: {} elements exceed MPI's int count ({})", what, n, INT_MAX));
  return static_cast<int>(n);
}

// The dtype a tensor travels as: 16-bit floats widen to float32 (exact), the rest as they are.
DType wire_dtype(DType dt) { return is_reduced_float(dt) ? kFloat32 : dt; }

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

MPI_Op mpi_op(DType dt) { return dt == DType::Bool ? MPI_LOR : MPI_SUM; }

const char* op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "mean"; }

// Every rank's (dtype, shape, extra) through one small allgather; a difference throws the same
// message on every rank, naming each rank's view.
void check_same_layout(const char* what, const Tensor& t, int64_t extra,
                       const std::string& extra_name) {
  if (!ctx.check_metadata || ctx.world == 1) return;
  constexpr int kMaxDims = 8;
  constexpr int kFields = 4 + kMaxDims;
  std::vector<int64_t> mine(kFields, -1);
  mine[0] = static_cast<int64_t>(t.dtype());
  mine[1] = t.dim();
  mine[2] = t.numel();
  mine[3] = extra;
  for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxDims); ++d) mine[4 + d] = t.size(d);
  std::vector<int64_t> all(static_cast<size_t>(kFields) * ctx.world);
  MPI_Request req;
  check_rc(MPI_Iallgather(mine.data(), kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T,
                          ctx.comm, &req),
           what);
  wait_request(req, fmt::format("{} (checking that the ranks agree)", what));
  auto describe = [&](int r) {
    const int64_t* f = all.data() + static_cast<size_t>(r) * kFields;
    Shape shape;
    for (int64_t d = 0; d < std::min<int64_t>(f[1], kMaxDims); ++d) shape.push_back(f[4 + d]);
    std::string s =
        fmt::format("rank {} has {} {}", r, dtype_name(static_cast<DType>(f[0])), shape_str(shape));
    if (f[1] > kMaxDims) s += fmt::format(" ({} dims, {} elements)", f[1], f[2]);
    if (!extra_name.empty()) s += fmt::format(" ({} {})", extra_name, f[3]);
    return s;
  };
  for (int r = 1; r < ctx.world; ++r) {
    if (!std::equal(all.begin(), all.begin() + kFields, all.begin() + r * kFields)) {
      fail(
          fmt::format("dist::{}: the ranks disagree: {}, {}; every rank must pass the same "
                      "dtype and shape",
                      what, describe(0), describe(r)));
    }
  }
}

// Sums rows 0..world-1 of `gathered` (world, n) into `out` (n) in rank order, then divides.
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

void check_mean_dtype(const char* what, DType dt) {
  if (!is_floating(dt))
    throw DTypeError(fmt::format(
        "dist::{}: mean needs a floating tensor, got {} (reduce with sum, or .to(kFloat32))", what,
        dtype_name(dt)));
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
  check_rc(MPI_Test(&state_->req, &flag, MPI_STATUS_IGNORE), state_->what);
  if (!flag) return false;
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
  int already = 0;
  MPI_Initialized(&already);
  int provided = MPI_THREAD_SINGLE;
  if (already) {
    MPI_Query_thread(&provided);
  } else {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
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
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &ctx.comm);
  MPI_Comm_set_errhandler(ctx.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(ctx.comm, &ctx.rank);
  MPI_Comm_size(ctx.comm, &ctx.world);
  ctx.timeout = env_timeout();
  const char* check = std::getenv("NABLA_DIST_CHECK");
  ctx.check_metadata = !(check && std::string(check) == "0");
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
double timeout_seconds() { return ctx.timeout; }
void set_timeout_seconds(double seconds) {
  if (!(seconds > 0))
    throw ValueError(fmt::format("dist::set_timeout_seconds: {} is not positive", seconds));
  ctx.timeout = seconds;
}

namespace detail {

void mark_broken(const std::string& why) {
  if (ctx.broken) return;
  ctx.broken = true;
  ctx.broken_why = why;
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
    check_rc(MPI_Iallgather(raw_data(flat), count, type, raw_data(s->gathered), count, type,
                            ctx.comm, &s->req),
             s->what);
  } else {
    check_rc(MPI_Iallreduce(MPI_IN_PLACE, raw_data(flat), count, type, mpi_op(flat.dtype()),
                            ctx.comm, &s->req),
             s->what);
  }
  return Work(std::move(s));
}

std::vector<std::string> all_gather_bytes(const std::string& mine, const char* what) {
  require_ready(what);
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(static_cast<size_t>(ctx.world));
  MPI_Request req;
  check_rc(MPI_Iallgather(&len, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, ctx.comm, &req), what);
  wait_request(req, what);
  std::vector<int> counts(lens.size()), displs(lens.size());
  int64_t total = 0;
  for (size_t r = 0; r < lens.size(); ++r) {
    counts[r] = checked_count(lens[r], what);
    displs[r] = checked_count(total, what);
    total += lens[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check_rc(MPI_Iallgatherv(mine.data(), counts[static_cast<size_t>(ctx.rank)], MPI_CHAR, all.data(),
                           counts.data(), displs.data(), MPI_CHAR, ctx.comm, &req),
           what);
  wait_request(req, what);
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(counts[r])));
  return out;
}

}  // namespace detail

// --- tensor collectives ----------------------------------------------------------------------

Work all_reduce_async(Tensor t, ReduceOp op, bool rank_order) {
  require_ready("all_reduce");
  if (op == ReduceOp::Mean) check_mean_dtype("all_reduce", t.dtype());
  check_same_layout("all_reduce", t, static_cast<int64_t>(op) * 2 + (rank_order ? 1 : 0),
                    "op*2+rank_order");
  NoGradGuard no_grad;
  const DType wire = wire_dtype(t.dtype());
  const bool in_place = wire == t.dtype() && t.is_contiguous();
  Tensor buffer = in_place ? t.detach() : t.detach().to(wire).contiguous();
  if (!in_place && buffer.storage() == t.storage()) buffer = buffer.clone();
  Work w = detail::all_reduce_flat_async(buffer, op, rank_order,
                                         fmt::format("all_reduce ({}, {} {})", op_name(op),
                                                     dtype_name(t.dtype()), shape_str(t.shape())));
  if (!in_place) w.set_target(t);
  return w;
}

void all_reduce_(Tensor& t, ReduceOp op, bool rank_order) {
  Work w = all_reduce_async(t, op, rank_order);
  w.wait();
}

Tensor all_reduce(const Tensor& t, ReduceOp op, bool rank_order) {
  Tensor out = t.detach().clone();
  all_reduce_(out, op, rank_order);
  return out;
}

void broadcast_(Tensor& t, int root) {
  require_ready("broadcast");
  if (root < 0 || root >= ctx.world)
    throw IndexError(
        fmt::format("dist::broadcast: root {} is not a rank (world size {})", root, ctx.world));
  check_same_layout("broadcast", t, root, "root");
  NoGradGuard no_grad;
  // 16-bit floats travel as they are here: no arithmetic, so their 2 bytes are sent as int16.
  const bool direct = t.is_contiguous();
  Tensor buf = direct ? t.detach() : t.detach().contiguous();
  const int64_t bytes = buf.numel() * static_cast<int64_t>(dtype_size(buf.dtype()));
  const std::string what =
      fmt::format("broadcast ({} {}, root {})", dtype_name(t.dtype()), shape_str(t.shape()), root);
  MPI_Request req;
  check_rc(
      MPI_Ibcast(raw_data(buf), checked_count(bytes, "broadcast"), MPI_BYTE, root, ctx.comm, &req),
      what);
  wait_request(req, what);
  if (!direct)
    t.detach().copy_(buf);
  else
    t.storage()->bump_version();
}

Tensor all_gather(const Tensor& t) {
  require_ready("all_gather");
  check_same_layout("all_gather", t, 0, "");
  NoGradGuard no_grad;
  Tensor buf = t.detach().contiguous();
  Shape shape = t.shape();
  shape.insert(shape.begin(), ctx.world);
  Tensor out = empty(shape, t.dtype());
  const int64_t elem = static_cast<int64_t>(dtype_size(t.dtype()));
  const int bytes = checked_count(buf.numel() * elem, "all_gather");
  const std::string what =
      fmt::format("all_gather ({} {})", dtype_name(t.dtype()), shape_str(t.shape()));
  MPI_Request req;
  check_rc(MPI_Iallgather(raw_data(buf), bytes, MPI_BYTE, raw_data(out), bytes, MPI_BYTE, ctx.comm,
                          &req),
           what);
  wait_request(req, what);
  return out;
}

void barrier() {
  require_ready("barrier");
  MPI_Request req;
  check_rc(MPI_Ibarrier(ctx.comm, &req), "barrier");
  wait_request(req, "barrier");
}

}  // namespace nabla::dist
