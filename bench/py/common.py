"""Shared by the PyTorch benchmark programs: the same protocol as bench/common.h.

Every program takes --threads, --warmup, --reps plus its own options (the same options as its C++
twin) and prints one line

    MEASURE ms=<median> min_ms=<min> rss_mb=<peak RSS> base_rss_mb=<RSS after setup> threads=<n>

followed by any extra key=value fields (flop=<count>, ops=<count>, ...).
"""

import argparse
import resource
import statistics
import sys
import time

import torch


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs first")
    p.add_argument("--reps", type=int, default=30, help="timed runs (the median is reported)")
    return p


def apply_threads(args):
    torch.set_num_threads(args.threads)
    if torch.get_num_threads() != args.threads:
        sys.exit(f"bench: asked for {args.threads} threads, got {torch.get_num_threads()}")


def peak_rss_mb():
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_it(args, fn):
    """Median and min over --reps individually timed calls after --warmup untimed ones, in ms."""
    for _ in range(args.warmup):
        fn()
    samples = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples), min(samples)


def report(args, timing, base_rss_mb, **extra):
    median, fastest = timing
    fields = [
        f"ms={median:.6g}",
        f"min_ms={fastest:.6g}",
        f"rss_mb={peak_rss_mb():.1f}",
        f"base_rss_mb={base_rss_mb:.1f}",
        f"threads={torch.get_num_threads()}",
    ]
    fields += [f"{k}={v}" for k, v in extra.items()]
    print("MEASURE " + " ".join(fields), flush=True)


def parse_dims(s):
    """'2048x128x384' -> [2048, 128, 384]."""
    try:
        dims = [int(part) for part in s.split("x")]
    except ValueError:
        dims = []
    if not dims or any(d < 0 for d in dims):
        sys.exit(f"bad shape '{s}', want e.g. 2048x512")
    return dims


def training_step(model, opt, inputs, labels, bf16=False):
    """One classifier training step, as the C++ benches time it: zero_grad (set to None, as
    nabla's zero_grad()), forward, cross-entropy, backward, optimizer step. bf16: forward and
    loss under torch.autocast("cpu", dtype=torch.bfloat16), as nabla's --bf16."""
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        opt.step()
    return step
