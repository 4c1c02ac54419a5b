// dist: nabla_dist over MPI, run by hand under mpirun (never by ctest; docs/distributed.md):
//   mpirun -np 2 --oversubscribe build/release/bench/bench_dist --threads 1
//   mpirun --bind-to none -np 1 build/release/bench/bench_dist --threads 2 --part step
//   (the 1-process twin; OpenMPI binds a job of <= 2 ranks to one core each by default)
// --part allreduce: all_reduce (sum, MPI's order) of float32 buffers 4 KiB..64 MiB, each time the
// median over --reps after a barrier, on rank 0; then alpha (latency) and beta (s/byte) fitted by
// least squares in relative error to t(n) = alpha + beta * n over those sizes:
//   RESULT bench=dist.allreduce world=P bytes=<n> ms=<median> algbw_gbs=<n/t> busbw_gbs=<...>
//   RESULT bench=dist.alpha_beta world=P alpha_us=<a> beta_ns_per_byte=<b>
// busbw = algbw * 2(P-1)/P, the bytes each rank moves in a ring all-reduce (NCCL's convention).
// --part overlap: encoder_small (bench/encoder_model.h), per rank batch 32/P: the backward
// alone (DDP hooks off under no_sync), the backward with DDP's bucketed all-reduces and finish()
// (with the communication thread, and as `polled` with the hooks polling MPI instead), and the
// all-reduce of all gradients alone, the three backwards in alternation:
//   RESULT bench=dist.overlap world=P ... backward_ms= ddp_backward_ms= comm_ms= hidden_frac=
//          finish_ms= polled_ddp_backward_ms= polled_hidden_frac= polled_finish_ms=
//   MEASURE ms=<DDP backward, the mode comm_thread_by_default() picks> ... backward_ms= comm_ms=
//          hidden_frac= comm_thread= world=      (bench/run.py's dist_overlap, against the
//          PyTorch twin bench/py/dist.py: torch DDP over gloo)
// hidden_frac = (backward + comm - ddp_backward) / comm: the share of communication hidden;
// finish_ms, the time in finish() (waiting for the buckets, writing .grad), is the part of the
// communication left exposed, a direct reading that a busy machine disturbs less;
// done_before_finish, the median count of buckets whose all-reduce had completed when backward
// returned (DDP's bucket_progress()), says whether communication progressed during backward at
// all, without timing it.
// --part step: whole training steps (forward, DDP backward, AdamW) of encoder_small and vit_small
// at a fixed global batch split over the ranks, for 2 x 1 thread vs 1 x 2 threads:
//   RESULT bench=dist.step model=<m> world=P threads=<t> global_batch=<g> ms=<median>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/common.h"
#include "bench/encoder_model.h"
#include "nabla/nabla.h"
#include "nabla/nn/distributed/data_parallel.h"
#include "nabla/nn/distributed/dist_detail.h"

using namespace nabla;

namespace {

// Median of `reps` timed runs of fn after `warmup`, each started together on every rank.
template <class F>
double median_ms(const bench::Options& opt, F&& fn) {
  for (int i = 0; i < opt.warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < opt.reps; ++i) {
    dist::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    samples.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// all_reduce of `flat` without the per-call metadata check (the sizes are the same everywhere).
void raw_all_reduce(const Tensor& flat) {
  dist::detail::all_reduce_flat_async(flat, dist::ReduceOp::Sum, false, "bench all_reduce").wait();
}

void bench_allreduce(const bench::Options& opt, int64_t min_bytes, int64_t max_bytes) {
  const int world = dist::world_size();
  std::vector<double> xs, ys;
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    Tensor buf = ones({bytes / 4});
    const double ms = median_ms(opt, [&] { raw_all_reduce(buf); });
    const double algbw = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    if (dist::rank() == 0)
      fmt::print(
          "RESULT bench=dist.allreduce world={} bytes={} ms={:.4g} algbw_gbs={:.4g} "
          "busbw_gbs={:.4g}\n",
          world, bytes, ms, algbw, algbw * 2.0 * (world - 1) / world);
    xs.push_back(static_cast<double>(bytes));
    ys.push_back(ms * 1e-3);
  }
  // Least squares for t = alpha + beta * n in relative error (weights 1/t^2): plain least squares
  // would fit the 64 MiB point alone and leave alpha, the small-message cost, meaningless.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double w = 1.0 / (ys[i] * ys[i]);
    sw += w;
    sx += w * xs[i];
    sy += w * ys[i];
    sxx += w * xs[i] * xs[i];
    sxy += w * xs[i] * ys[i];
  }
  const double beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  const double alpha = (sy - beta * sx) / sw;
  if (dist::rank() == 0)
    fmt::print("RESULT bench=dist.alpha_beta world={} alpha_us={:.4g} beta_ns_per_byte={:.4g}\n",
               world, alpha * 1e6, beta * 1e9);
}

void bench_overlap(const bench::Options& opt, int64_t bucket_bytes) {
  const int world = dist::world_size();
  bench::Config c = bench::config_named("small");
  c.batch = std::max<int64_t>(1, c.batch / world);
  // Two copies of the model, one DDP with the communication thread and one without, timed in
  // alternation so a busy machine slows both alike.
  struct Setup {
    std::shared_ptr<bench::EncoderClassifier> model;
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::vector<double> samples;
    std::vector<double> finish_samples;  // the part in finish(): communication not hidden
    std::vector<double> done_samples;    // buckets whose all-reduce completed before finish()
  };
  auto make = [&](bool comm_thread) {
    manual_seed(0);
    Setup s;
    s.model = std::make_shared<bench::EncoderClassifier>(c);
    s.ddp = std::make_unique<dist::DistributedDataParallel>(
        s.model,
        dist::DataParallelOptions{.bucket_bytes = bucket_bytes, .comm_thread = comm_thread});
    return s;
  };
  const double base_rss_mb = bench::peak_rss_mb();
  Setup local = make(true), threaded = make(true), polled = make(false);
  Generator gen(static_cast<uint64_t>(1 + dist::rank()));
  const Tensor tokens = randint(0, c.vocab, {c.batch, c.seq}, gen);
  const Tensor labels = randint(0, c.classes, {c.batch}, gen);
  // Forwards are outside the timed part: time only backward (+ communication).
  auto time_backward = [&](Setup& s, bool sync, bool keep) {
    for (Tensor& p : s.model->parameters()) p.set_grad(Tensor());
    Tensor loss = cross_entropy(s.model->forward(tokens), labels);
    dist::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    double finish_ms = 0;
    double done = 0;
    if (sync) {
      loss.backward();
      done = static_cast<double>(s.ddp->bucket_progress().completed);
      const auto t1 = std::chrono::steady_clock::now();
      s.ddp->finish();
      finish_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    } else {
      auto no_sync = s.ddp->no_sync();
      loss.backward();
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (keep) {
      s.samples.push_back(ms);
      s.finish_samples.push_back(finish_ms);
      s.done_samples.push_back(done);
    }
  };
  for (int i = 0; i < opt.warmup + opt.reps; ++i) {
    const bool keep = i >= opt.warmup;
    time_backward(local, false, keep);
    time_backward(threaded, true, keep);
    time_backward(polled, true, keep);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double backward_ms = median(local.samples);
  const double ddp_ms = median(threaded.samples), polled_ms = median(polled.samples);
  Tensor all_grads = zeros({local.model->num_parameters()});
  const double comm_ms =
      median_ms(opt, [&] { dist::all_reduce_(all_grads, dist::ReduceOp::Mean); });
  if (dist::rank() != 0) return;
  fmt::print(
      "RESULT bench=dist.overlap world={} per_rank_batch={} params={} buckets={} "
      "comm_thread={} backward_ms={:.4g} ddp_backward_ms={:.4g} comm_ms={:.4g} "
      "hidden_frac={:.3f} finish_ms={:.4g} polled_ddp_backward_ms={:.4g} "
      "polled_hidden_frac={:.3f} polled_finish_ms={:.4g} done_before_finish={:.0f} "
      "polled_done_before_finish={:.0f}\n",
      world, c.batch, local.model->num_parameters(), threaded.ddp->buckets().size(),
      threaded.ddp->uses_comm_thread() ? 1 : 0, backward_ms, ddp_ms, comm_ms,
      (backward_ms + comm_ms - ddp_ms) / comm_ms, median(threaded.finish_samples), polled_ms,
      (backward_ms + comm_ms - polled_ms) / comm_ms, median(polled.finish_samples),
      median(threaded.done_samples), median(polled.done_samples));
  // For bench/run.py, beside bench/py/dist.py: the DDP backward in the mode DDP picks here.
  const bool by_default = dist::comm_thread_by_default();
  const Setup& chosen = by_default ? threaded : polled;
  const double chosen_ms = by_default ? ddp_ms : polled_ms;
  bench::Timing t = bench::summarize(chosen.samples);
  bench::report(
      t, base_rss_mb,
      {{"backward_ms", fmt::format("{:.4g}", backward_ms)},
       {"comm_ms", fmt::format("{:.4g}", comm_ms)},
       {"hidden_frac", fmt::format("{:.3f}", (backward_ms + comm_ms - chosen_ms) / comm_ms)},
       {"comm_thread", by_default ? "1" : "0"},
       {"world", std::to_string(world)}});
}

template <class M>
void bench_step_of(const bench::Options& opt, const char* name, std::shared_ptr<M> model,
                   const Tensor& inputs, const Tensor& labels, int64_t global_batch) {
  dist::DistributedDataParallel ddp(model);
  model->train();
  optim::AdamW adamw(model->parameters(), {.lr = 1e-3});
  const double ms = median_ms(opt, [&] {
    adamw.zero_grad();
    ddp.backward(cross_entropy(model->forward(inputs), labels));
    adamw.step();
  });
  if (dist::rank() == 0)
    fmt::print("RESULT bench=dist.step model={} world={} threads={} global_batch={} ms={:.4g}\n",
               name, dist::world_size(), num_threads(), global_batch, ms);
}

void bench_step(const bench::Options& opt) {
  const int64_t world = dist::world_size();
  Generator gen(static_cast<uint64_t>(7 + dist::rank()));
  {
    bench::Config c = bench::config_named("small");
    const int64_t global = c.batch;
    c.batch = std::max<int64_t>(1, global / world);
    manual_seed(0);
    bench_step_of(opt, "encoder_small", std::make_shared<bench::EncoderClassifier>(c),
                  randint(0, c.vocab, {c.batch, c.seq}, gen), randint(0, c.classes, {c.batch}, gen),
                  global);
  }
  {
    // bench/vit.cpp's vit_small: 28x28x1, 4x4 patches, dim 64, 4 heads, MLP 128, depth 6.
    nn::ViTConfig vc;
    vc.image_size = 28;
    vc.patch_size = 4;
    vc.in_channels = 1;
    vc.num_classes = 10;
    vc.dim = 64;
    vc.depth = 6;
    vc.heads = 4;
    vc.mlp_dim = 128;
    vc.dropout = 0.1;
    vc.emb_dropout = 0.0;
    const int64_t global = 128, batch = std::max<int64_t>(1, global / world);
    manual_seed(0);
    bench_step_of(opt, "vit_small", std::make_shared<nn::ViT>(vc), randn({batch, 1, 28, 28}, gen),
                  randint(0, 10, {batch}, gen), global);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  dist::InitGuard mpi(&argc, &argv);
  CLI::App app{"nabla: all-reduce bandwidth, DDP overlap and data-parallel steps over MPI"};
  bench::Options opt;
  opt.threads = 1;
  opt.warmup = 3;
  opt.reps = 10;
  std::string part = "all";
  int64_t min_bytes = 4 << 10, max_bytes = int64_t{64} << 20;
  int64_t bucket_bytes = dist::DataParallelOptions{}.bucket_bytes;
  bench::add_common_options(app, opt);
  app.add_option("--part", part, "allreduce | overlap | step | all")
      ->check(CLI::IsMember({"allreduce", "overlap", "step", "all"}));
  app.add_option("--min-bytes", min_bytes, "smallest all-reduce (bytes)");
  app.add_option("--max-bytes", max_bytes, "largest all-reduce (bytes; sizes step by 4x)");
  app.add_option("--bucket-bytes", bucket_bytes,
                 "--part overlap: DDP's bucket size (encoder_small's 2.1 MB of gradients fit one "
                 "default bucket, which can start only when backward ends)");
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);
  if (part == "allreduce" || part == "all") bench_allreduce(opt, min_bytes, max_bytes);
  if (part == "overlap" || part == "all") bench_overlap(opt, bucket_bytes);
  if (part == "step" || part == "all") bench_step(opt);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_dist: rank {}: {}\n", dist::rank(), e.what());
  return 1;
}
