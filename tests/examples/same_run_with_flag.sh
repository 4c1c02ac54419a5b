#!/usr/bin/env bash
# Two --smoke runs of a trainer in new processes write the same metrics.csv and a checkpoint with
# the same tensors, byte for byte. The second run may add one flag that must not change the
# arithmetic (e.g. --checkpoint-layers: activations recomputed in backward, dropout replaying its
# Philox offsets); "-" adds none, which checks determinism (same seed and thread count).
# Usage: same_run_with_flag.sh <safetensors_equal binary> <trainer binary> <flag|-> [flags for both]
set -euo pipefail
compare=$1
bin=$2
flag=$3
shift 3
second=()
what="determinism:"
if [ "$flag" != "-" ]; then
  second=("$flag")
  what="same run: $flag gives"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --smoke "$@" --out "$work/first" >/dev/null
"$bin" --smoke "$@" "${second[@]}" --out "$work/second" >/dev/null
if ! cmp -s "$work/first/metrics.csv" "$work/second/metrics.csv"; then
  echo "$what metrics.csv differs"
  diff "$work/first/metrics.csv" "$work/second/metrics.csv" || true
  exit 1
fi
if ! "$compare" "$work/first/checkpoint.safetensors" "$work/second/checkpoint.safetensors"; then
  echo "$what checkpoints differ"
  exit 1
fi
echo "$what identical metrics ($(wc -l < "$work/second/metrics.csv") lines) and checkpoints"
