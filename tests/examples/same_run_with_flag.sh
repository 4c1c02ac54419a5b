#!/usr/bin/env bash
# A flag that must not change the arithmetic (e.g. --checkpoint-layers: activations recomputed in
# backward, dropout replaying its Philox offsets) leaves a trainer's --smoke run bitwise the same:
# the same metrics.csv and a checkpoint with the same tensors as the run without it.
# Usage: same_run_with_flag.sh <safetensors_equal binary> <trainer binary> <flag> [flags for both]
set -euo pipefail
compare=$1
bin=$2
flag=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --smoke "$@" --out "$work/without" >/dev/null
"$bin" --smoke "$@" "$flag" --out "$work/with" >/dev/null
if ! cmp -s "$work/without/metrics.csv" "$work/with/metrics.csv"; then
  echo "same run: metrics.csv differs with $flag"
  diff "$work/without/metrics.csv" "$work/with/metrics.csv" || true
  exit 1
fi
if ! "$compare" "$work/without/checkpoint.safetensors" "$work/with/checkpoint.safetensors"; then
  echo "same run: checkpoints differ with $flag"
  exit 1
fi
echo "same run: $flag gives identical metrics ($(wc -l < "$work/with/metrics.csv") lines) and checkpoints"
