#!/usr/bin/env bash
# The same seed and thread count give the same run: a trainer's --smoke run, twice in new
# processes, writes the same metrics.csv and a checkpoint with the same tensors, byte for byte.
# Usage: examples_determinism.sh <safetensors_equal binary> <trainer binary> [extra flags]
set -euo pipefail
compare=$1
bin=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --smoke "$@" --out "$work/first" >/dev/null
"$bin" --smoke "$@" --out "$work/second" >/dev/null
if ! cmp -s "$work/first/metrics.csv" "$work/second/metrics.csv"; then
  echo "determinism: metrics.csv differs"
  diff "$work/first/metrics.csv" "$work/second/metrics.csv" || true
  exit 1
fi
if ! "$compare" "$work/first/checkpoint.safetensors" "$work/second/checkpoint.safetensors"; then
  echo "determinism: checkpoints differ"
  exit 1
fi
echo "determinism: identical metrics ($(wc -l < "$work/first/metrics.csv") lines) and checkpoints"
