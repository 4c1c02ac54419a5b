#!/usr/bin/env bash
# ThreadSanitizer run of the [threads] tests (tests/threads/): the DataLoader's prefetch thread,
# the allocator's free lists, kernels at 1 and 2 threads, grad mode and the load monitor on
# several threads, the default generator.
#
# Setup (`tsan` preset): clang with -fsanitize=thread; OpenMP through LLVM's libomp with its
# Archer tool (libomp-14-dev), which tells TSan about OpenMP's barriers, locks and tasks so they
# are not reported as races. OpenBLAS is not instrumented: its own accesses are invisible, and
# ignore_noninstrumented_modules=1 keeps the runtimes' internals out of the reports. Only
# test_threads and the libraries it links (core, ops, data) are built.
#
# First a canary proves the setup: a barrier-ordered OpenMP program must give no report and a
# racy one must give one. Then test_threads runs; the script fails on any report or failure.
# Prints "tsan: N test cases passed, R reports".
set -euo pipefail
cd "$(dirname "$0")/.."

archer=/usr/lib/llvm-14/lib/libarcher.so
if [[ ! -e $archer ]]; then
  echo "tsan: $archer not found: apt-get install libomp-14-dev (scripts/setup.sh)" >&2
  exit 1
fi
echo "== tsan: the [threads] tests under ThreadSanitizer (clang, libomp + Archer)"
export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER-$(command -v ccache || true)}"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$(nproc)" --target test_threads
built_at=$SECONDS
mkdir -p build/tsan/logs
log=build/tsan/logs

export OMP_TOOL_LIBRARIES=$archer ARCHER_OPTIONS="verbose=1"
export TSAN_OPTIONS="ignore_noninstrumented_modules=1:halt_on_error=0:second_deadlock_stack=1"
reports() { grep -c "WARNING: ThreadSanitizer" "$1" || true; }

clang++ -O1 -g -fsanitize=thread -fopenmp=libomp tests/threads/canary/omp_canary.cpp \
  -o build/tsan/omp_canary
build/tsan/omp_canary >"$log/canary.log" 2>&1 || true
build/tsan/omp_canary race >"$log/canary-race.log" 2>&1 || true
if ! grep -q "Archer detected" "$log/canary.log" || (($(reports "$log/canary.log") != 0)) ||
   (($(reports "$log/canary-race.log") == 0)); then
  echo "tsan: the canary failed: Archer inactive, a barrier reported or a race missed" >&2
  cat "$log/canary.log" "$log/canary-race.log" >&2
  exit 1
fi
echo "tsan: canary ok (Archer active; barrier-ordered code clean, a planted race reported)"

rc=0
OMP_NUM_THREADS=2 build/tsan/tests/test_threads "[threads]" >"$log/test_threads.log" 2>&1 || rc=$?
n=$(reports "$log/test_threads.log")
if ((rc != 0 || n != 0)) || ! grep -q "Archer detected" "$log/test_threads.log"; then
  cat "$log/test_threads.log"
  echo "tsan: FAILED (exit $rc, $n reports)"
  exit 1
fi
cases=$(grep -o 'in [0-9]* test cases' "$log/test_threads.log" | grep -o '[0-9]*')
echo "tsan: $cases test cases passed, $n reports (build $built_at s, run $((SECONDS - built_at)) s)"
