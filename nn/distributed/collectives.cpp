// The tensor collectives of dist.h: a metadata check (every rank's dtype and shape), then the
// non-blocking MPI call and the deadline wait of mpi_context.h.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/dtype.h"
#include "nabla/core/shape.h"
#include "nabla/nn/distributed/dist.h"
#include "nabla/nn/distributed/dist_detail.h"
#include "nabla/nn/distributed/mpi_context.h"

namespace nabla::dist {

using namespace mpi;

namespace {

// Every rank's (dtype, shape, extra) through one small allgather; a difference throws the same
// message on every rank, naming each rank's view.
// `extra` is what else must match (op, root), shown by `show_extra`.
void check_same_layout(const char* what, const Tensor& t, int64_t extra,
                       std::string (*show_extra)(int64_t)) {
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
  call(what, [&] {
    return MPI_Iallgather(mine.data(), kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T,
                          ctx.comm, &req);
  });
  wait_request(req, fmt::format("{} (checking that the ranks agree)", what));
  auto describe = [&](int r) {
    const int64_t* f = all.data() + static_cast<size_t>(r) * kFields;
    Shape shape;
    for (int64_t d = 0; d < std::min<int64_t>(f[1], kMaxDims); ++d) shape.push_back(f[4 + d]);
    std::string s =
        fmt::format("rank {} has {} {}", r, dtype_name(static_cast<DType>(f[0])), shape_str(shape));
    if (f[1] > kMaxDims) s += fmt::format(" ({} dims, {} elements)", f[1], f[2]);
    if (show_extra) s += fmt::format(" ({})", show_extra(f[3]));
    return s;
  };
  for (int r = 1; r < ctx.world; ++r) {
    if (!std::equal(all.begin(), all.begin() + kFields, all.begin() + r * kFields)) {
      // Every rank saw the same table and throws the same message: the communicator stays usable.
      throw DistError(
          fmt::format("dist::{}: the ranks disagree: {}, {}; every rank must pass "
                      "the same dtype and shape",
                      what, describe(0), describe(r)));
    }
  }
}

// Sums rows 0..world-1 of `gathered` (world, n) into `out` (n) in rank order, then divides.

void check_mean_dtype(const char* what, DType dt) {
  if (!is_floating(dt))
    throw DTypeError(fmt::format(
        "dist::{}: mean needs a floating tensor, got {} (reduce with sum, or .to(kFloat32))", what,
        dtype_name(dt)));
}

}  // namespace

// --- tensor collectives ----------------------------------------------------------------------

Work all_reduce_async(Tensor t, ReduceOp op, bool rank_order) {
  require_ready("all_reduce");
  if (op == ReduceOp::Mean) check_mean_dtype("all_reduce", t.dtype());
  check_same_layout("all_reduce", t, static_cast<int64_t>(op) * 2 + (rank_order ? 1 : 0),
                    [](int64_t e) {
                      return fmt::format("{}{}", op_name(static_cast<ReduceOp>(e / 2)),
                                         e % 2 ? " in rank order" : "");
                    });
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
  check_same_layout("broadcast", t, root, [](int64_t r) { return fmt::format("root {}", r); });
  NoGradGuard no_grad;
  // 16-bit floats travel as they are here: no arithmetic, so their 2 bytes are sent as int16.
  const bool direct = t.is_contiguous();
  Tensor buf = direct ? t.detach() : t.detach().contiguous();
  const int64_t bytes = buf.numel() * static_cast<int64_t>(dtype_size(buf.dtype()));
  const std::string what =
      fmt::format("broadcast ({} {}, root {})", dtype_name(t.dtype()), shape_str(t.shape()), root);
  MPI_Request req;
  const int count = checked_count(bytes, "broadcast");
  call(what, [&] { return MPI_Ibcast(raw_data(buf), count, MPI_BYTE, root, ctx.comm, &req); });
  wait_request(req, what);
  if (!direct)
    t.detach().copy_(buf);
  else
    t.storage()->bump_version();
}

Tensor all_gather(const Tensor& t) {
  require_ready("all_gather");
  check_same_layout("all_gather", t, 0, nullptr);
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
  call(what, [&] {
    return MPI_Iallgather(raw_data(buf), bytes, MPI_BYTE, raw_data(out), bytes, MPI_BYTE, ctx.comm,
                          &req);
  });
  wait_request(req, what);
  return out;
}

void barrier() {
  require_ready("barrier");
  MPI_Request req;
  call("barrier", [&] { return MPI_Ibarrier(ctx.comm, &req); });
  wait_request(req, "barrier");
}

}  // namespace nabla::dist
