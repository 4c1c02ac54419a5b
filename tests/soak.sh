#!/usr/bin/env bash
# Soak: two trainings at once on the machine's cores both finish, each with bitwise the result of
# a run alone, within 3x the time alone. A deadlock is caught by ctest's TIMEOUT.
# The time check is retried once: other processes on a shared machine can slow one attempt.
# Usage: soak.sh <soak_train binary> [steps]
set -euo pipefail
bin=$1
steps=${2:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
result() { grep -o 'RESULT.*params=[0-9a-f]*' "$1"; }  # the line without its time
seconds() { grep -o 'seconds=[0-9.]*' "$1" | cut -d= -f2; }

attempt() {
  "$bin" "$steps" > "$work/alone.log"
  "$bin" "$steps" > "$work/a.log" &
  local pa=$!
  "$bin" "$steps" > "$work/b.log" &
  local pb=$!
  wait "$pa" || { echo "soak: first concurrent run failed"; exit 1; }
  wait "$pb" || { echo "soak: second concurrent run failed"; exit 1; }
  local want
  want=$(result "$work/alone.log")
  for run in a b; do
    if [ "$(result "$work/$run.log")" != "$want" ]; then
      echo "soak: a concurrent run's result differs from the run alone"
      echo "alone:      $want"
      echo "concurrent: $(result "$work/$run.log")"
      exit 1
    fi
  done
  local alone ta tb
  alone=$(seconds "$work/alone.log")
  ta=$(seconds "$work/a.log")
  tb=$(seconds "$work/b.log")
  echo "soak: alone ${alone} s; together ${ta} s and ${tb} s; $want"
  awk -v a="$alone" -v x="$ta" -v y="$tb" 'BEGIN { exit !(x <= 3 * a && y <= 3 * a) }'
}

if attempt || attempt; then
  echo "soak: both finished with the result of a run alone, within 3x its time"
else
  echo "soak: a concurrent run took more than 3x the time alone, twice"
  exit 1
fi
