"""dist, PyTorch twin of bench/dist.cpp's --part overlap: DDP overlap on encoder_small.

torch.distributed with the gloo backend, P processes on this host, each with --threads threads:

    mpirun -np 2 --oversubscribe /usr/bin/python3 bench/py/dist.py --part overlap --threads 1
    /usr/bin/python3 bench/py/dist.py --part overlap --threads 1   # spawns --world processes

Under mpirun the rank and world size come from OpenMPI's environment and each rank keeps
mpirun's binding (one core each for <= 2 ranks, as bench_dist gets); started directly, the script
spawns --world processes with torch.multiprocessing and pins process r to core r (the same
binding). Rendezvous: TCP on 127.0.0.1:--port; gloo over the loopback interface.

encoder_small (bench/py/encoder.py, bench/encoder_model.h), per-rank batch 32/P, the same model
and timing as the C++ part: the backward alone (DDP under no_sync), the backward of the model in
torch.nn.parallel.DistributedDataParallel (gloo all-reduces of its buckets overlapped with
backward; loss.backward() returns once they are done and the averaged gradients are in .grad),
timed in alternation on two copies of the model, forwards untimed; and the all-reduce (then / P)
of all gradients as one float32 tensor alone. Buckets: bucket_cap_mb = --bucket-bytes / 2^20,
and torch's smaller first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB by default) set to
--first-bucket-bytes (default: --bucket-bytes, nabla's rule: every bucket the same cap). torch
builds the buckets in gradient-ready order after the first iteration, inside the warm-up.
broadcast_buffers is off: the model's only buffer is the non-persistent position table, which
nabla's DDP does not send either. Rank 0 prints

    RESULT bench=dist.overlap framework=torch world=P per_rank_batch= params= buckets=
           backward_ms= ddp_backward_ms= comm_ms= hidden_frac=
    MEASURE ms=<ddp_backward> ... backward_ms= comm_ms= hidden_frac= world=

hidden_frac = (backward + comm - ddp_backward) / comm, as bench_dist's.
"""

import contextlib
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import common
import encoder

BATCH_PER_WORLD = encoder.CONFIGS["small"]["batch"]  # global batch 32, split over the ranks


def parse_args():
    p = common.parser(__doc__.split("\n\n")[0])
    p.set_defaults(threads=1, warmup=3, reps=10)  # bench_dist's defaults
    p.add_argument("--part", choices=["overlap"], default="overlap")
    p.add_argument("--bucket-bytes", type=int, default=4 << 20, help="DDP's bucket cap (bytes)")
    p.add_argument("--first-bucket-bytes", type=int, default=0,
                   help="torch's first-bucket cap (bytes); 0: --bucket-bytes")
    p.add_argument("--world", type=int, default=2, help="processes to spawn when not under mpirun")
    p.add_argument("--port", type=int, default=int(os.environ.get("MASTER_PORT", "29511")))
    return p.parse_args()


def median_ms(args, fn):
    """Median of --reps timed calls after --warmup untimed ones, each after a barrier."""
    for _ in range(args.warmup):
        fn()
    samples = []
    for _ in range(args.reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def make_ddp(c, args):
    torch.manual_seed(0)
    model = encoder.EncoderClassifier(c)
    model.train()
    return torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=args.bucket_bytes / float(1 << 20), broadcast_buffers=False)


def bucket_sizes(ddp):
    """The bytes of each of DDP's buckets (the rebuilt ones once torch has rebuilt them)."""
    info = ddp._get_ddp_logging_data()
    key = "rebuilt_bucket_sizes" if info.get("has_rebuilt_buckets") else "bucket_sizes"
    return [int(x) for x in str(info.get(key, "")).split(",") if x.strip()]


def bench_overlap(args, rank, world):
    c = dict(encoder.CONFIGS["small"], batch=max(1, BATCH_PER_WORLD // world))
    dist._DEFAULT_FIRST_BUCKET_BYTES = args.first_bucket_bytes or args.bucket_bytes
    base_rss = common.peak_rss_mb()
    local, synced = make_ddp(c, args), make_ddp(c, args)
    gen = torch.Generator().manual_seed(1 + rank)
    tokens = torch.randint(0, encoder.VOCAB, (c["batch"], c["seq"]), generator=gen)
    labels = torch.randint(0, encoder.CLASSES, (c["batch"],), generator=gen)
    samples = {"local": [], "synced": []}

    def time_backward(ddp, label, sync, keep):
        for p in ddp.parameters():
            p.grad = None
        # no_sync must cover the forward: DDP decides at forward time whether backward reduces.
        with contextlib.nullcontext() if sync else ddp.no_sync():
            loss = F.cross_entropy(ddp(tokens), labels)
            dist.barrier()
            t0 = time.perf_counter()
            loss.backward()
            ms = (time.perf_counter() - t0) * 1e3
        if keep:
            samples[label].append(ms)

    for i in range(args.warmup + args.reps):
        keep = i >= args.warmup
        time_backward(local, "local", False, keep)
        time_backward(synced, "synced", True, keep)
    backward_ms = statistics.median(samples["local"])
    ddp_ms = statistics.median(samples["synced"])
    ddp_min_ms = min(samples["synced"])
    params = sum(p.numel() for p in synced.parameters())
    flat = torch.zeros(params)

    def all_reduce_mean():
        dist.all_reduce(flat)
        flat.div_(world)

    comm_ms = median_ms(args, all_reduce_mean)
    buckets = len(bucket_sizes(synced))
    hidden = (backward_ms + comm_ms - ddp_ms) / comm_ms
    if rank == 0:
        print(f"RESULT bench=dist.overlap framework=torch world={world} "
              f"per_rank_batch={c['batch']} params={params} buckets={buckets} "
              f"backward_ms={backward_ms:.4g} ddp_backward_ms={ddp_ms:.4g} comm_ms={comm_ms:.4g} "
              f"hidden_frac={hidden:.3f}", flush=True)
        common.report(args, (ddp_ms, ddp_min_ms), base_rss, backward_ms=f"{backward_ms:.4g}",
                      comm_ms=f"{comm_ms:.4g}", hidden_frac=f"{hidden:.3f}", world=world)


def run(rank, world, args, pin):
    if pin:  # mpirun's default for <= 2 ranks: one core each
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[rank % len(cores)]})
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    common.apply_threads(args)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                            world_size=world)
    try:
        bench_overlap(args, rank, world)
    finally:
        dist.destroy_process_group()


def main():
    args = parse_args()
    if not dist.is_available() or not dist.is_gloo_available():
        sys.exit("bench/py/dist.py: this torch has no gloo backend")
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        run(int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"]),
            args, pin=False)
    else:
        torch.multiprocessing.spawn(run, args=(args.world, args, True), nprocs=args.world)


if __name__ == "__main__":
    main()
