// DistributedDataParallel (data_parallel.h): the reducer of PyTorch's DDP (Li et al., "PyTorch
// Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020): gradient buckets
// in reverse registration order, each all-reduced as soon as its gradients are ready.
//
// The hook sits on each parameter's gradient accumulation (Tensor::register_hook on a leaf runs
// in AccumulateGrad, core/autograd.cpp) and sees the parameter's complete gradient of this
// backward (the engine sums every consumer's part before a node runs), before it is added to
// .grad; the bucket therefore gets .grad + incoming (the same add, grad_sum, that AccumulateGrad
// does next), and finish() overwrites .grad with the mean. A complete bucket's all-reduce runs on
// the communication thread (comm_thread.h), the hooks only hand it over.
#include "nabla/nn/distributed/data_parallel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "nabla/core/autograd.h"
#include "nabla/core/cpu_load.h"
#include "nabla/core/dtype.h"
#include "nabla/core/parallel.h"
#include "nabla/core/shape.h"
#include "nabla/nn/distributed/comm_thread.h"
#include "nabla/nn/distributed/dist_detail.h"

namespace nabla::dist {

struct DistributedDataParallel::State {
  struct Param {
    std::string name;
    Tensor tensor;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer, in elements
    bool ready = false;  // its gradient of the current backward is in the bucket
  };
  struct Bucket {
    DType dtype = kFloat32;  // of its parameters; the buffer is wire_dtype(dtype)
    Tensor flat;
    std::vector<size_t> params;
    size_t pending = 0;  // parameters not ready yet
    bool started = false;
    Work work;
  };
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::vector<Tensor> buffers;
  GradReduction reduction = GradReduction::Auto;
  int root = 0;
  bool broadcast_buffers = true;
  bool no_sync = false;
  bool syncing = false;    // a synchronised backward has begun and finish() has not run
  size_t next_bucket = 0;  // buckets start strictly in index order
  std::unique_ptr<detail::CommThread> comm;  // null: the hooks start the buckets themselves
  size_t comm_base = 0;  // comm->submitted() before this backward's first bucket

  Tensor slot(const Param& p) const {
    return buckets[p.bucket].flat.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.shape());
  }

  bool rank_order(DType dt) const {
    if (!is_floating(dt)) return false;
    return reduction == GradReduction::RankOrder ||
           (reduction == GradReduction::Auto && dt == kFloat64);
  }

  void start_ready_buckets() {
    while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) start(next_bucket++);
  }

  void start(size_t b) {
    Bucket& bucket = buckets[b];
    bucket.started = true;
    std::string what = fmt::format(
        "DistributedDataParallel gradient bucket {} ({} {}, first parameter '{}')", b,
        bucket.params.size(), dtype_name(bucket.dtype), params[bucket.params.front()].name);
    const bool ordered = rank_order(bucket.dtype);
    if (comm) {
      if (b == 0) comm_base = comm->submitted();
      comm->submit([flat = bucket.flat, ordered, what = std::move(what)] {
        return detail::all_reduce_flat_async(flat, ReduceOp::Mean, ordered, what);
      });
    } else {
      bucket.work = detail::all_reduce_flat_async(bucket.flat, ReduceOp::Mean, ordered, what);
    }
  }

  BucketProgress progress_so_far() const {
    BucketProgress out;
    out.launched = next_bucket;
    if (next_bucket == 0) return out;
    if (comm) {
      // A bucket of this backward is one submitted after comm_base; earlier ones all completed.
      auto since = [&](size_t count) {
        return std::min(count - std::min(count, comm_base), out.launched);
      };
      out.started = since(comm->started());
      out.completed = since(comm->completed());
    } else {
      out.started = next_bucket;
      for (size_t b = 0; b < next_bucket; ++b) out.completed += buckets[b].work.done() ? 1 : 0;
    }
    return out;
  }

  // Lets MPI progress the buckets in flight (non-blocking collectives advance inside MPI calls).
  void progress() {
    for (size_t b = 0; b < next_bucket; ++b) buckets[b].work.test();
  }

  void on_gradient(size_t i, const Tensor& incoming) {
    Param& p = params[i];
    if (p.ready)
      throw DistError(fmt::format(
          "DistributedDataParallel: parameter '{}' got a second gradient before finish(): call "
          "ddp.finish() (or ddp.backward(loss)) after each backward, or accumulate inside "
          "ddp.no_sync()",
          p.name));
    syncing = true;
    NoGradGuard no_grad;
    const Tensor prev = p.tensor.grad();
    slot(p).copy_(prev.defined() ? grad_sum(prev.detach(), incoming) : incoming);
    p.ready = true;
    Bucket& bucket = buckets[p.bucket];
    if (--bucket.pending == 0) start_ready_buckets();
    if (!comm) progress();
  }

  void finish() {
    if (!syncing) return;
    NoGradGuard no_grad;
    // Parameters without a gradient in this backward contribute what .grad holds, or zeros.
    for (size_t b = next_bucket; b < buckets.size(); ++b) {
      for (size_t i : buckets[b].params) {
        Param& p = params[i];
        if (p.ready) continue;
        const Tensor g = p.tensor.grad();
        if (g.defined())
          slot(p).copy_(g);
        else
          slot(p).zero_();
        p.ready = true;
      }
      buckets[b].pending = 0;
    }
    start_ready_buckets();
    if (comm)
      comm->wait_all();
    else
      for (Bucket& bucket : buckets) bucket.work.wait();
    for (Param& p : params) {
      Tensor g = empty(p.tensor.shape(), p.tensor.dtype());
      g.copy_(slot(p));
      p.tensor.set_grad(g);
      p.ready = false;
    }
    for (Bucket& bucket : buckets) {
      bucket.pending = bucket.params.size();
      bucket.started = false;
    }
    next_bucket = 0;
    syncing = false;
    if (broadcast_buffers) sync_buffers();
  }

  // Every buffer packed into one message: one broadcast per step, not one per buffer.
  void sync_buffers() {
    if (buffers.empty() || world_size() == 1) return;
    NoGradGuard no_grad;
    std::vector<Tensor> packed;
    int64_t total = 0;
    for (const Tensor& b : buffers) {
      packed.push_back(b.detach().contiguous());
      total += b.numel() * static_cast<int64_t>(dtype_size(b.dtype()));
    }
    auto bytes_of = [](const Tensor& t) {
      return static_cast<char*>(t.storage()->data()) +
             t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
    };
    std::vector<char> message(static_cast<size_t>(total));
    int64_t at = 0;
    for (const Tensor& t : packed) {
      const int64_t n = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
      std::memcpy(message.data() + at, bytes_of(t), static_cast<size_t>(n));
      at += n;
    }
    detail::broadcast_bytes(
        message.data(), total, root,
        fmt::format("DistributedDataParallel buffers ({} of them, root {})", buffers.size(), root));
    if (rank() == root) return;
    at = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const Tensor& t = packed[i];
      const int64_t n = t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
      std::memcpy(bytes_of(t), message.data() + at, static_cast<size_t>(n));
      at += n;
      if (t.storage() == buffers[i].storage())
        t.storage()->bump_version();
      else
        buffers[i].detach().copy_(t);  // a non-contiguous buffer: through its copy
    }
  }
};

bool comm_thread_by_default() { return cpu_load::allowed_cores() > num_threads(); }

namespace {

bool comm_thread_from_env(std::optional<bool> option) {
  const char* v = std::getenv("NABLA_DDP_COMM_THREAD");
  if (!v || !*v) return option ? *option : comm_thread_by_default();
  if (std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  throw ValueError(
      fmt::format("DistributedDataParallel: NABLA_DDP_COMM_THREAD='{}' is neither 0 nor 1", v));
}

}  // namespace

namespace {

// One line per parameter and buffer: what every rank must agree on.
std::vector<std::string> describe_state(const nn::Module& module) {
  std::vector<std::string> lines;
  for (const auto& [name, t] : module.named_parameters())
    lines.push_back(fmt::format("parameter '{}' {} {}{}", name, dtype_name(t.dtype()),
                                shape_str(t.shape()), t.requires_grad() ? "" : " (frozen)"));
  for (const auto& [name, t] : module.named_buffers())
    lines.push_back(
        fmt::format("buffer '{}' {} {}", name, dtype_name(t.dtype()), shape_str(t.shape())));
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

// Every rank gets every rank's list (small: one line per tensor) and compares it with rank 0's,
// so all ranks throw the same message.
void check_same_state(const nn::Module& module) {
  const std::vector<std::string> mine = describe_state(module);
  const std::vector<std::string> all =
      detail::all_gather_bytes(join_lines(mine), "DistributedDataParallel (comparing models)");
  const std::vector<std::string> first = split_lines(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const std::vector<std::string> other = split_lines(all[r]);
    size_t k = 0;
    while (k < first.size() && k < other.size() && first[k] == other[k]) ++k;
    auto entry = [&](const std::vector<std::string>& l) {
      return k < l.size() ? l[k] : fmt::format("nothing (only {} entries)", l.size());
    };
    throw DistError(fmt::format(
        "DistributedDataParallel: the ranks have different models: entry {} is {} on rank 0 but "
        "{} on rank {} (a different model configuration on some rank?)",
        k, entry(first), entry(other), r));
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DataParallelOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  if (!module_) throw ValueError("DistributedDataParallel: the module is null");
  if (!initialized())
    throw DistError(
        "DistributedDataParallel: nabla::dist is not initialized (make a dist::InitGuard first)");
  if (options.bucket_bytes <= 0)
    throw ValueError(fmt::format("DistributedDataParallel: bucket_bytes {} must be positive",
                                 options.bucket_bytes));
  if (options.root < 0 || options.root >= world_size())
    throw IndexError(fmt::format("DistributedDataParallel: root {} is not a rank (world size {})",
                                 options.root, world_size()));
  const bool use_comm_thread = comm_thread_from_env(options.comm_thread);
  check_same_state(*module_);
  for (const auto& [name, t] : module_->named_parameters()) {
    Tensor x = t;
    broadcast_(x, options.root);
  }
  for (const auto& [name, t] : module_->named_buffers()) {
    Tensor x = t;
    broadcast_(x, options.root);
  }

  // Buckets: parameters in reverse registration order, one open bucket per dtype, closed once it
  // holds bucket_bytes.
  State& s = *state_;
  s.reduction = options.reduction;
  s.root = options.root;
  s.broadcast_buffers = options.broadcast_buffers;
  // Persistent buffers only: the others (PositionalEncoding's table) are derived from the
  // configuration, which check_same_state compared, and would cost their bytes every step.
  std::set<std::string> persistent;
  for (const auto& [name, t] : module_->state_dict()) persistent.insert(name);
  for (const auto& [name, t] : module_->named_buffers())
    if (persistent.count(name)) s.buffers.push_back(t);
  const io::NamedTensors named = module_->named_parameters();
  std::vector<std::pair<DType, size_t>> open;  // dtype -> index of its open bucket
  for (auto it = named.rbegin(); it != named.rend(); ++it) {
    if (!it->second.requires_grad()) continue;
    const DType dt = it->second.dtype();
    const DType wire = is_reduced_float(dt) ? kFloat32 : dt;
    auto o = std::find_if(open.begin(), open.end(), [&](const auto& e) { return e.first == dt; });
    if (o == open.end()) {
      s.buckets.emplace_back();
      s.buckets.back().dtype = dt;
      open.emplace_back(dt, s.buckets.size() - 1);
      o = open.end() - 1;
    }
    const size_t b = o->second;
    State::Param p;
    p.name = it->first;
    p.tensor = it->second;
    p.bucket = b;
    s.buckets[b].params.push_back(s.params.size());
    s.params.push_back(std::move(p));
    int64_t elements = 0;
    for (size_t i : s.buckets[b].params) elements += s.params[i].tensor.numel();
    if (elements * static_cast<int64_t>(dtype_size(wire)) >= options.bucket_bytes) open.erase(o);
  }
  for (State::Bucket& bucket : s.buckets) {
    int64_t offset = 0;
    for (size_t i : bucket.params) {
      s.params[i].offset = offset;
      offset += s.params[i].tensor.numel();
    }
    bucket.flat = zeros({offset}, is_reduced_float(bucket.dtype) ? kFloat32 : bucket.dtype);
    bucket.pending = bucket.params.size();
  }
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.params[i].tensor.register_hook([weak, i](const Tensor& grad) {
      if (auto state = weak.lock(); state && !state->no_sync) state->on_gradient(i, grad);
      return Tensor();
    });
  }
  if (use_comm_thread) s.comm = std::make_unique<detail::CommThread>();
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::backward(const Tensor& loss) {
  loss.backward();
  finish();
}

void DistributedDataParallel::finish() { state_->finish(); }

bool DistributedDataParallel::sync_pending() const { return state_->syncing; }

void DistributedDataParallel::broadcast_buffers() { state_->sync_buffers(); }

bool DistributedDataParallel::uses_comm_thread() const { return state_->comm != nullptr; }

DistributedDataParallel::BucketProgress DistributedDataParallel::bucket_progress() const {
  return state_->progress_so_far();
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), prev_(ddp.state_->no_sync) {
  ddp_.state_->no_sync = true;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.state_->no_sync = prev_; }

std::vector<DistributedDataParallel::BucketInfo> DistributedDataParallel::buckets() const {
  std::vector<BucketInfo> out;
  for (const State::Bucket& b : state_->buckets) {
    BucketInfo info{b.dtype, {}, b.flat.numel() * static_cast<int64_t>(dtype_size(b.flat.dtype()))};
    for (size_t i : b.params) info.parameters.push_back(state_->params[i].name);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace nabla::dist
