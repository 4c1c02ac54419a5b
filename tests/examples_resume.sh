#!/usr/bin/env bash
# --resume continues the same run: a smoke run interrupted after its first epoch and resumed in
# a new process ends with exactly the metrics of an uninterrupted smoke run.
# Usage: examples_resume.sh <trainer binary> [extra flags for every run]
set -euo pipefail
bin=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --smoke "$@" --out "$work/straight" >/dev/null
"$bin" --smoke "$@" --out "$work/resumed" --stop-after 1 > "$work/first_part.log"
grep -q "stopping at step" "$work/first_part.log" || { echo "resume: --stop-after did not stop"; exit 1; }
"$bin" --smoke "$@" --out "$work/resumed" --resume >/dev/null
if diff <(cut -d, -f1-5 "$work/straight/metrics.csv") <(cut -d, -f1-5 "$work/resumed/metrics.csv"); then
  echo "resume: identical metrics ($(wc -l < "$work/straight/metrics.csv") lines)"
else
  echo "resume: metrics differ"; exit 1
fi
