#!/usr/bin/env bash
# Benchmarks nabla against PyTorch on this machine: installs PyTorch if missing (setup.sh
# --torch), builds the bench programs in the release preset (-O3 -march=native), runs them all
# with bench/run.py and writes what it printed to bench/results/latest.txt.
# Extra arguments go to bench/run.py, e.g.  scripts/bench.sh --threads 1 --only gemm
# Run it on a quiet machine: anything else running on the cores skews the timings.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --torch
cmake --preset release -DNABLA_BUILD_BENCH=ON >/dev/null
cmake --build --preset release --target nabla_benches -j "$(nproc)"
/usr/bin/python3 bench/run.py --build-dir build/release --out bench/results/latest.txt "$@"
