#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, `fuzz` preset: clang, ASan + UBSan) and runs each one
# on its seed corpus. Prints one line per target with its execution count; exits non-zero if any
# target found a crash, a leak, a timeout or an out-of-memory (input saved under
# build/fuzz/artifacts/, log under build/fuzz/logs/).
#
#   scripts/fuzz.sh --ci             each target: 200,000 executions or 60 s, whichever first
#   scripts/fuzz.sh --seconds N      each target for N seconds (a long local run)
#   scripts/fuzz.sh --runs N         each target for N executions (no time limit)
#   scripts/fuzz.sh --jobs J         targets run J at a time (default: the number of cores)
#   scripts/fuzz.sh --timeout S      an input running over S s (wall clock) is a finding (default
#                                    10; a long run at nice 19 beside other work needs more, since
#                                    a starved process can wait seconds for a core)
#   scripts/fuzz.sh --make-corpus    rewrites tests/fuzz/corpus/ with fuzz_make_corpus
#   scripts/fuzz.sh ... fuzz_idx     only the named targets
#
# Target fuzz_X reads its committed seeds from tests/fuzz/corpus/X/ and the inputs that once
# failed from tests/fuzz/regressions/X/ (neither is written), and keeps
# the new inputs it finds in build/fuzz/corpus/X/ (reused by the next run). A single allocation over 256 MB counts as
# a finding (-malloc_limit_mb): a file that declares a 2^40-element tensor must be refused before
# anything is allocated.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz_safetensors fuzz_checkpoint fuzz_idx fuzz_idx_gzip fuzz_fortune fuzz_tokenizer)
seconds=60 runs=0 jobs=$(nproc) timeout=10 make_corpus=0 targets=()
while (($#)); do
  case "$1" in
    --ci) seconds=60 runs=200000 ;;
    --seconds) seconds="$2"; shift ;;
    --runs) runs="$2" seconds=0; shift ;;
    --jobs) jobs="$2"; shift ;;
    --timeout) timeout="$2"; shift ;;
    --make-corpus) make_corpus=1 ;;
    fuzz_*) targets+=("$1") ;;
    *) sed -n '2,21p' "$0"; exit 2 ;;
  esac
  shift
done
((${#targets[@]})) || targets=("${all_targets[@]}")

limit="$seconds s"
((runs)) && limit="$runs executions or $limit, whichever comes first"
((seconds)) || limit="$runs executions"
echo "== fuzz: ${#targets[@]} targets, each for $limit; $jobs at a time"
export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER-$(command -v ccache || true)}"
cmake --preset fuzz >/dev/null
build_targets=("${targets[@]}")
((make_corpus)) && build_targets+=(fuzz_make_corpus)
cmake --build --preset fuzz -j "$(nproc)" --target "${build_targets[@]}"
bin=build/fuzz/tests/fuzz
built_at=$SECONDS
if ((make_corpus)); then
  rm -rf tests/fuzz/corpus
  "$bin/fuzz_make_corpus" tests/fuzz/corpus
fi

logs=build/fuzz/logs artifacts=build/fuzz/artifacts
mkdir -p "$logs" "$artifacts"
# Parsers run single-threaded; leaks are findings; UBSan stops at the first report.
export OMP_NUM_THREADS=1
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

run_target() {
  local t=$1 name=${1#fuzz_} args=()
  mkdir -p "build/fuzz/corpus/$name"
  args=("build/fuzz/corpus/$name" "tests/fuzz/corpus/$name")
  # Inputs that once failed (tests/fuzz/regressions/X/, kept by hand; --make-corpus leaves them).
  [[ -d tests/fuzz/regressions/$name ]] && args+=("tests/fuzz/regressions/$name")
  args+=(-malloc_limit_mb=256 -rss_limit_mb=2048
        "-timeout=$timeout" -print_final_stats=1 "-artifact_prefix=$artifacts/$t-")
  ((seconds > 0)) && args+=("-max_total_time=$seconds")
  ((runs > 0)) && args+=("-runs=$runs")
  # Checkpoint warnings (old format, other thread count) go to stderr on every load: silence
  # the target's stderr; libFuzzer's and the sanitizers' reports still print.
  [[ $t == fuzz_checkpoint ]] && args+=(-close_fd_mask=2)
  "$bin/$t" "${args[@]}" >"$logs/$t.log" 2>&1
}

summary() {
  local t=$1 rc=$2 log="$logs/$1.log" execs secs
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || true)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' ||
         true)
  if ((rc == 0)); then
    printf 'fuzz %-17s %10s executions in %4s s, 0 crashes/leaks/timeouts/OOMs\n' "$t" \
      "${execs:-?}" "${secs:-?}"
  else
    printf 'fuzz %-17s FAILED (exit %s) after %s executions: %s\n' "$t" "$rc" "${execs:-?}" \
      "$(grep -m1 -E 'ERROR: |SUMMARY: |==[0-9]+== ERROR' "$log" || echo "see $log")"
    grep -m1 -o "Test unit written to .*" "$log" || true
  fi
}

status=0
declare -A running=()  # pid -> target
wait_any() {  # waits for whichever target ends first and prints its line
  local rc=0 pid
  wait -n -p pid "${!running[@]}" || rc=$?
  summary "${running[$pid]}" "$rc"
  ((rc == 0)) || status=1
  unset "running[$pid]"
}
# The slowest targets first, so that the short ones fill the other cores at the end.
ordered=()
for t in fuzz_tokenizer fuzz_safetensors fuzz_idx_gzip; do
  if [[ " ${targets[*]} " == *" $t "* ]]; then ordered+=("$t"); fi
done
for t in "${targets[@]}"; do
  if [[ " ${ordered[*]} " != *" $t "* ]]; then ordered+=("$t"); fi
done
for t in "${ordered[@]}"; do
  ((${#running[@]} < jobs)) || wait_any
  run_target "$t" &
  running[$!]=$t
done
while ((${#running[@]})); do wait_any; done
echo "fuzz: build $built_at s, runs $((SECONDS - built_at)) s"
exit "$status"
