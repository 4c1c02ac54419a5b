#!/usr/bin/env bash
# A trainer under `mpirun -np 2` takes the steps of one process with the same global batch, and
# a run stopped on 2 processes resumes on 1 where it stopped (issue 24). Smoke runs, dropout off
# (each rank draws its own masks) and one thread per process:
#   1. one process straight, the reference;
#   2. two processes straight;
#   3. two processes stopped after the first epoch (--stop-after 1), then resumed on one.
# Every metrics.csv row must match the reference: step, epoch and lr exactly; the training loss
# and the test loss to 1e-4 relative (float32 gradients summed in another order; a rank that
# trained without the others' gradients is off by far more); the test accuracy to one test text
# in 128 (a text on the decision boundary may flip).
# Usage: examples_data_parallel.sh <mpirun> <trainer binary> [flags for every run]
set -euo pipefail
mpirun=$1
bin=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--smoke --threads 1 --dropout 0 --global-batch 64 "$@")
np2=("$mpirun" -np 2 --oversubscribe)

"$bin" "${flags[@]}" --out "$work/one" >/dev/null
"${np2[@]}" "$bin" "${flags[@]}" --out "$work/two" > "$work/two.log"
grep -q "RESULT .*world_size=2" "$work/two.log" || { echo "data-parallel: no RESULT with world_size=2"; cat "$work/two.log"; exit 1; }
[ "$(grep -c '^RESULT' "$work/two.log")" = 1 ] || { echo "data-parallel: more than rank 0 reported"; exit 1; }
"${np2[@]}" "$bin" "${flags[@]}" --out "$work/moved" --stop-after 1 >/dev/null
"$bin" "${flags[@]}" --out "$work/moved" --resume >/dev/null

same_run() {  # reference.csv other.csv label
  awk -F, -v label="$3" '
    function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return d / (m > 1e-12 ? m : 1e-12) }
    NR == FNR { ref[FNR] = $0; n = FNR; next }
    {
      if (!(FNR in ref)) { print label ": extra row " FNR; bad = 1; next }
      split(ref[FNR], r, ",")
      if (FNR == 1) { if ($0 != ref[1]) { print label ": columns differ"; bad = 1 } next }
      if ($1 != r[1] || $2 != r[2] || rel($4, r[4]) > 1e-12) { print label ": step/epoch/lr differ in row " FNR; bad = 1 }
      if (rel($3, r[3]) > 1e-4 || rel($6, r[6]) > 1e-4) { print label ": loss " $3 " vs " r[3] ", test loss " $6 " vs " r[6]; bad = 1 }
      d = $5 - r[5]; if (d < 0) d = -d
      if (d > 1.0 / 128 + 1e-9) { print label ": test accuracy " $5 " vs " r[5]; bad = 1 }
      rows = FNR
    }
    END { if (rows != n) { print label ": " rows " rows, reference " n; bad = 1 } exit bad }' "$1" "$2"
}
same_run "$work/one/metrics.csv" "$work/two/metrics.csv" "2 processes"
same_run "$work/one/metrics.csv" "$work/moved/metrics.csv" "stopped on 2, resumed on 1"
echo "data-parallel: 2 processes and a 2-to-1 resume match 1 process ($(($(wc -l < "$work/one/metrics.csv") - 1)) epochs)"
