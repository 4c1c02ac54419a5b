#!/usr/bin/env bash
# --resume continues the same run: a smoke run interrupted after its first epoch and resumed in
# a new process ends with exactly the metrics of an uninterrupted smoke run.
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --smoke --out "$work/straight" >/dev/null
"$bin" --smoke --out "$work/resumed" --stop-after 1 >/dev/null
"$bin" --smoke --out "$work/resumed" --resume >/dev/null
if diff <(cut -d, -f1-5 "$work/straight/metrics.csv") <(cut -d, -f1-5 "$work/resumed/metrics.csv"); then
  echo "resume: identical metrics ($(wc -l < "$work/straight/metrics.csv") lines)"
else
  echo "resume: metrics differ"; exit 1
fi
