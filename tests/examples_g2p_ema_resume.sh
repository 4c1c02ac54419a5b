#!/usr/bin/env bash
# transformer_g2p --ema: a run stopped after its first epoch and resumed in a new process ends
# with the checkpoint of an uninterrupted run, byte for byte, its weight average included (the
# checkpoint's "average" section); and --ema cannot resume a checkpoint that has no average.
# Usage: examples_g2p_ema_resume.sh <safetensors_equal binary> <transformer_g2p binary>
set -euo pipefail
compare=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--smoke --threads 1 --ema 0.9)
"$bin" "${flags[@]}" --out "$work/straight" >"$work/straight.log"
grep -q "last_per=" "$work/straight.log" || { echo "ema resume: no last_per in RESULT"; exit 1; }
"$bin" "${flags[@]}" --out "$work/resumed" --stop-after 1 >/dev/null
"$bin" "${flags[@]}" --out "$work/resumed" --resume >/dev/null
cmp -s "$work/straight/metrics.csv" "$work/resumed/metrics.csv" ||
  { echo "ema resume: metrics differ"; exit 1; }
"$compare" "$work/straight/checkpoint.safetensors" "$work/resumed/checkpoint.safetensors" ||
  { echo "ema resume: checkpoints differ"; exit 1; }
"$bin" --smoke --threads 1 --out "$work/plain" --stop-after 1 >/dev/null
if "$bin" "${flags[@]}" --out "$work/plain" --resume >"$work/plain.log" 2>&1; then
  echo "ema resume: --ema resumed a checkpoint without an average"; exit 1
fi
grep -q "has no weight average" "$work/plain.log" ||
  { echo "ema resume: unexpected error:"; cat "$work/plain.log"; exit 1; }
echo "ema resume: identical metrics and checkpoints (average included)"
