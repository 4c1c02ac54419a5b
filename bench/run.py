#!/usr/bin/env python3
"""Runs nabla's benchmarks side by side with PyTorch, on the same machine and thread count, and
prints for each configuration one line

    RESULT bench=<name> nabla_ms=<m> torch_ms=<m> ratio=<nabla/torch> nabla_rss_mb=<r>
           torch_rss_mb=<r> [extra fields]

then a summary table. Each (bench, framework) runs in its own process, so peak RSS is per
configuration; both get OMP_NUM_THREADS=<threads> and set their thread count to it. Times are
medians of --reps runs after --warmup runs (see bench/common.h and bench/py/common.py).

Another process using the CPUs while a bench runs ruins its timing (OpenMP threads wait for each
other), so the runner measures the CPU time used by everything else during each run and reruns
any run disturbed by more than --max-interference of the machine; each RESULT line says the worst
interference it kept.

Extra fields come from what a program reports: flop=<count> gives <fw>_gflops and
<fw>_peak_frac (against the fma_peak probe, run first), ops=<count> gives <fw>_us_per_op.

Adding a benchmark is one Bench(...) entry in benches() below.
Usage: /usr/bin/python3 bench/run.py [--build-dir build/release] [--only REGEX] [--out FILE]
"""

import argparse
import datetime
import os
import platform
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY_DIR = ROOT / "bench" / "py"


@dataclass
class Bench:
    name: str
    nabla: list  # C++ program (a target in <build>/bench) and its arguments
    torch: list  # Python script in bench/py and its arguments (the same options)
    others: dict = field(default_factory=dict)  # label -> another C++ program + arguments
    warmup: int = 0  # > 0: this bench's own --warmup / --reps (runs that take seconds)
    reps: int = 0
    # > 0: both sides run under `mpirun -np <ranks>`, each rank on --threads / ranks threads
    ranks: int = 0
    fields: tuple = ()  # MEASURE fields copied into the RESULT line as <label>_<field>


# (M, K, N) or (batch, M, K, N) products, as the models call them.
GEMM_SHAPES = [
    # encoder_small projections and FFN: batch 32 x seq 64 tokens
    "2048x128x384", "2048x128x128", "2048x128x512", "2048x512x128",
    # attention: 128 = batch x heads, scores Q K^T and weights @ V
    "128x64x32x64", "128x64x64x32",
    # encoder_large
    "4096x256x768", "4096x256x1024", "4096x1024x256",
    # vit_small
    "6400x64x192", "6400x64x128",
]
FUSED_OPS = ["softmax", "layer_norm", "gelu", "cross_entropy", "dropout"]
FUSED_SHAPES = ["2048x512", "32x4x64x64"]  # (32 * 64, 512) tokens x features; (B, H, T, T)


def benches():
    out = []
    for mode in ["nograd", "grad", "fwdbwd"]:
        args = ["--mode", mode, "--n", "1000", "--numel", "16"]
        out.append(Bench(f"op_overhead.{mode}", ["bench_op_overhead", *args],
                         ["op_overhead.py", *args]))
    for shape in GEMM_SHAPES:
        args = ["--shape", shape]
        out.append(Bench(f"gemm.{shape}", ["bench_gemm", *args], ["gemm.py", *args],
                         {"cblas": ["bench_gemm", *args, "--impl", "cblas"]}))
    for op in FUSED_OPS:
        for shape in FUSED_SHAPES:
            for mode in ["fwd", "fwdbwd"]:
                args = ["--op", op, "--mode", mode, "--shape", shape]
                out.append(Bench(f"{op}.{mode}.{shape}", ["bench_fused_ops", *args],
                                 ["fused_ops.py", *args]))
    # Scaled dot-product attention, fused (flash-style) against torch's math path, with the
    # composite twin as a third column: the heads of the models above, then a long-sequence sweep
    # (d = 64) whose extra_mb shows the fused kernel's memory growing linearly with T.
    for shape, extra in [("128x64x32", ["--dropout", "0.1"]), ("512x50x16", ["--dropout", "0.1"]),
                         ("128x256x32", []), ("8x256x64", []), ("8x512x64", []),
                         ("8x1024x64", []), ("8x2048x64", [])]:
        args = ["--shape", shape, "--mode", "fwdbwd", *extra]
        out.append(Bench(f"attention.fwdbwd.{shape}" + ("_dropout" if extra else ""),
                         ["bench_attention", *args], ["attention.py", *args],
                         {"composite": ["bench_attention", *args, "--impl", "composite"]}))
    # One AdamW step over encoder_small's parameters (27 tensors, 526k floats).
    out.append(Bench("adamw_step", ["bench_optim_step"], ["optim_step.py"]))
    # Whole models: a Transformer-encoder classifier's training step (small, large), its
    # inference (small, eval + no grad) and a ViT training step (bench/encoder.cpp, bench/vit.cpp).
    for name, config, mode in [("encoder_small", "small", "train"),
                               ("encoder_large", "large", "train"),
                               ("encoder_infer", "small", "infer")]:
        args = ["--config", config, "--mode", mode]
        out.append(Bench(name, ["bench_encoder", *args], ["encoder.py", *args]))
    # encoder_infer with int8 Linear layers (bench/int8.cpp: nn::quantize_dynamic; the twin:
    # torch's quantize_dynamic). encoder_infer.int8 / encoder_infer is nabla's int8 speed-up.
    for config, name in [("small", "encoder_infer.int8"), ("large", "encoder_large_infer.int8")]:
        args = ["--config", config, "--precision", "int8"]
        out.append(Bench(name, ["bench_int8", *args], ["int8.py", *args]))
    out.append(Bench("vit_small", ["bench_vit"], ["vit.py"]))
    # The training steps under bf16 autocast, against torch.autocast("cpu", torch.bfloat16)
    # (issue 22); the float32 rows above are nabla's own baseline.
    for name, config in [("encoder_small.bf16", "small"), ("encoder_large.bf16", "large")]:
        args = ["--config", config, "--mode", "train", "--bf16"]
        out.append(Bench(name, ["bench_encoder", *args], ["encoder.py", *args]))
    out.append(Bench("vit_small.bf16", ["bench_vit", "--bf16"], ["vit.py", "--bf16"]))
    out.append(Bench("cnn_small", ["bench_cnn"], ["cnn.py"]))
    # char_gpt's model (bench/gpt.cpp): a training step at the example's batch and context, and
    # 500 greedy characters after a 256-character prompt with and without the KV cache (both
    # sides; torch's cache is the twin's hand-written one). A generation takes seconds, so those
    # run 1 warm-up and 5 timed generations. Cache speed-up: recompute nabla_ms / cached nabla_ms.
    out.append(Bench("gpt_train", ["bench_gpt", "--mode", "train"], ["gpt.py", "--mode", "train"]))
    # DDP on 2 ranks (bench/dist.cpp --part overlap, bench/py/dist.py: torch DDP over gloo): the
    # DDP backward of encoder_small, and how much of the all-reduce it hid (docs/distributed.md).
    out.append(Bench("dist_overlap", ["bench_dist", "--part", "overlap"],
                     ["dist.py", "--part", "overlap"], warmup=3, reps=20, ranks=2,
                     fields=("backward_ms", "comm_ms", "hidden_frac")))
    for cache, name in [("on", "cached"), ("off", "recompute")]:
        args = ["--mode", "generate", "--cache", cache]
        out.append(Bench(f"gpt_generate.{name}", ["bench_gpt", *args], ["gpt.py", *args],
                         warmup=1, reps=5))
    return out


class Runner:
    def __init__(self, args):
        self.args = args
        self.lines = []
        self.failures = 0
        self.retries = 0
        self.bench = None  # the Bench being measured (its own warmup / reps)
        # OMPI_ALLOW_RUN_AS_ROOT*: mpirun (the ranks > 0 benches) also runs as root (containers).
        self.env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
                        MKL_NUM_THREADS=str(args.threads), OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def emit(self, line=""):
        print(line, flush=True)
        self.lines.append(line)

    def command(self, framework, argv):
        warmup, reps = self.args.warmup, self.args.reps
        if self.bench is not None and self.bench.reps:  # never more than asked (--smoke)
            warmup, reps = min(warmup, self.bench.warmup), min(reps, self.bench.reps)
        common = ["--threads", str(self.threads_per_rank()), "--warmup", str(warmup),
                  "--reps", str(reps)]
        launcher = []
        if self.bench is not None and self.bench.ranks:
            launcher = [self.args.mpirun, "-np", str(self.bench.ranks), "--oversubscribe",
                        "-x", f"OMP_NUM_THREADS={self.threads_per_rank()}"]
        if framework == "torch":
            return [*launcher, self.args.python, str(PY_DIR / argv[0]), *argv[1:], *common]
        return [*launcher, str(self.args.build_dir / "bench" / argv[0]), *argv[1:], *common]

    def threads_per_rank(self):
        ranks = self.bench.ranks if self.bench is not None and self.bench.ranks else 1
        return max(1, self.args.threads // ranks)

    def run(self, cmd):
        """Runs one process until it ran undisturbed (see interference()), at most --max-tries
        times; returns (stdout, interference) of the least disturbed run, or None on failure."""
        best = None
        for attempt in range(self.args.max_tries):
            before = cpu_snapshot()
            try:
                p = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                                   timeout=self.args.timeout)
            except (OSError, subprocess.TimeoutExpired) as e:
                self.fail(cmd, str(e))
                return None
            if p.returncode != 0:
                self.fail(cmd, f"exit {p.returncode}: {p.stderr.strip()[-400:]}")
                return None
            noise = interference(before, cpu_snapshot())
            if best is None or noise < best[1]:
                best = (p.stdout, noise)
            if noise <= self.args.max_interference:
                break
            self.retries += 1
            time.sleep(self.args.retry_wait)
        return best

    def fail(self, cmd, why):
        self.failures += 1
        self.emit(f"ERROR {' '.join(cmd)}: {why}")

    def measure(self, framework, argv):
        """Best (lowest median) of --rounds runs of one program; None on failure."""
        best = None
        for _ in range(self.args.rounds):
            run = self.run(self.command(framework, argv))
            if run is None:
                return None
            out, noise = run
            m = re.search(r"^MEASURE (.*)$", out, re.M)
            if not m:
                self.fail(self.command(framework, argv), "no MEASURE line")
                return None
            fields = dict(kv.split("=", 1) for kv in m.group(1).split())
            fields["interference"] = noise
            if int(fields["threads"]) != self.threads_per_rank():
                self.fail(self.command(framework, argv), f"ran on {fields['threads']} threads")
                return None
            if best is None or float(fields["ms"]) < float(best["ms"]):
                best = fields
        return best

    def fma_peak(self):
        run = self.run(self.command("nabla", ["bench_fma_peak"]))
        m = re.search(r"^RESULT bench=fma_peak .*$", run[0] if run else "", re.M)
        if not m:
            return None
        self.emit(f"{m.group(0)} interference={run[1]:.2f}")
        return float(re.search(r"gflops=([0-9.]+)", m.group(0)).group(1))


def cpu_snapshot():
    """(busy CPU seconds of the whole machine, including time stolen by the hypervisor; CPU
    seconds of our finished children; wall clock)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields)
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, ru.ru_utime + ru.ru_stime, time.monotonic()


def interference(before, after):
    """Share of the machine's CPU capacity used by anything but the bench process while it ran
    (other processes, the hypervisor). Another build on the cores makes OpenMP barriers wait for
    descheduled threads and timings meaningless, so such runs are repeated."""
    busy = after[0] - before[0]
    ours = after[1] - before[1]
    wall = after[2] - before[2]
    return max(0.0, busy - ours) / (wall * (os.cpu_count() or 1))


def fmt_num(x):
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"


def result_fields(bench, measures, peak):
    """The RESULT line's fields: the required ones first, then per-framework extras."""
    nab, tor = measures["nabla"], measures["torch"]
    f = {"bench": bench.name}
    f["nabla_ms"] = fmt_num(float(nab["ms"]))
    f["torch_ms"] = fmt_num(float(tor["ms"]))
    f["ratio"] = f"{float(nab['ms']) / float(tor['ms']):.3f}"
    f["nabla_rss_mb"] = nab["rss_mb"]
    f["torch_rss_mb"] = tor["rss_mb"]
    for label, m in measures.items():
        if label not in ("nabla", "torch"):
            f[f"{label}_ms"] = fmt_num(float(m["ms"]))
            f[f"{label}_rss_mb"] = m["rss_mb"]
    for label, m in measures.items():
        f[f"{label}_rss_base_mb"] = m["base_rss_mb"]
    for label, m in measures.items():
        for k in bench.fields:
            if k in m:
                f[f"{label}_{k}"] = m[k]
    for label, m in measures.items():
        if "extra_mb" in m:
            f[f"{label}_extra_mb"] = m["extra_mb"]
    for label, m in measures.items():
        ms = float(m["ms"])
        if "flop" in m:
            gflops = float(m["flop"]) / (ms * 1e6)
            f[f"{label}_gflops"] = f"{gflops:.1f}"
            if peak:
                f[f"{label}_peak_frac"] = f"{gflops / peak:.2f}"
        if "ops" in m:
            f[f"{label}_us_per_op"] = f"{ms * 1e3 / float(m['ops']):.3g}"
    f["threads"] = nab["threads"]
    f["interference"] = f"{max(m['interference'] for m in measures.values()):.2f}"
    return f


def summary(rows, max_interference):
    """A fixed-width table: one row per bench."""
    head = ["bench", "nabla ms", "torch ms", "ratio", "nabla MB", "torch MB", "notes"]
    table = [head]
    for f in rows:
        notes = []
        if "nabla_gflops" in f:
            notes.append(f"GFLOP/s nabla {f['nabla_gflops']} torch {f['torch_gflops']}"
                         + (f" cblas {f['cblas_gflops']}" if "cblas_gflops" in f else ""))
        if "nabla_peak_frac" in f:
            notes.append(f"peak {f['nabla_peak_frac']}/{f['torch_peak_frac']}")
        if "nabla_us_per_op" in f:
            notes.append(f"us/op nabla {f['nabla_us_per_op']} torch {f['torch_us_per_op']}")
        if float(f["interference"]) > max_interference:
            notes.append(f"DISTURBED (interference {f['interference']})")
        table.append([f["bench"], f["nabla_ms"], f["torch_ms"], f["ratio"], f["nabla_rss_mb"],
                      f["torch_rss_mb"], "; ".join(notes)])
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = []
    for i, r in enumerate(table):
        lines.append("  ".join(c.ljust(w) if j in (0, 6) else c.rjust(w)
                               for j, (c, w) in enumerate(zip(r, widths))).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def machine_header(args):
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    torch_version = subprocess.run(
        [args.python, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True).stdout.strip() or "not found"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"# nabla benchmarks, {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"# machine: {model}, {os.cpu_count()} logical CPUs, {platform.machine()}, "
        f"{platform.platform()}",
        f"# threads={args.threads} warmup={args.warmup} reps={args.reps} rounds={args.rounds} "
        f"load_avg_at_start={load}",
        f"# nabla commit {commit} ({args.build_dir}); torch {torch_version} ({args.python})",
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", type=Path, default=ROOT / "build" / "release")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch")
    p.add_argument("--mpirun", default="mpirun", help="launcher of the benches with ranks")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=1,
                   help="run each process this many times, keep the lowest median")
    p.add_argument("--only", default="", help="regex: run only benches whose name matches")
    p.add_argument("--list", action="store_true", help="print the bench names and exit")
    p.add_argument("--timeout", type=float, default=600, help="seconds per process")
    p.add_argument("--max-interference", type=float, default=0.1,
                   help="rerun a process if others used more than this share of the CPUs")
    p.add_argument("--max-tries", type=int, default=20,
                   help="runs per process before keeping the least disturbed one")
    p.add_argument("--retry-wait", type=float, default=10, help="seconds before a rerun")
    p.add_argument("--out", type=Path, help="also write everything printed to this file")
    p.add_argument("--smoke", action="store_true",
                   help="allow --reps < 20 (a quick check that everything runs; not results)")
    args = p.parse_args()
    if args.reps < 20 and not args.smoke:
        p.error("--reps must be at least 20 (use --smoke for a quick check)")
    args.build_dir = args.build_dir.resolve()

    selected = [b for b in benches() if re.search(args.only, b.name)]
    if args.list:
        print("\n".join(b.name for b in selected))
        return 0

    r = Runner(args)
    for line in machine_header(args):
        r.emit(line)
    peak = r.fma_peak()
    rows = []
    for bench in selected:
        r.bench = bench
        measures = {}
        for label, framework, argv in [("nabla", "nabla", bench.nabla),
                                       ("torch", "torch", bench.torch),
                                       *[(k, "nabla", v) for k, v in bench.others.items()]]:
            m = r.measure(framework, argv)
            if m is None:
                break
            measures[label] = m
        else:
            f = result_fields(bench, measures, peak)
            rows.append(f)
            r.emit("RESULT " + " ".join(f"{k}={v}" for k, v in f.items()))
    r.emit()
    for line in summary(rows, args.max_interference):
        r.emit(line)
    r.emit(f"# reruns because of interference: {r.retries}")
    r.emit("# load_avg_at_end=" + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if r.failures:
        r.emit(f"# {r.failures} failure(s)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(r.lines) + "\n")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
