#!/usr/bin/env bash
# fault.sh stop|kill MPIEXEC PROGRAM: runs dist_fault_peer on 2 ranks, rank 1 stopping (SIGSTOP)
# or dying (SIGKILL) at step 3. Passes when the job ends non-zero well within the outer limit, and
# rank 0 said which collective failed (stop: nabla's deadline; kill: nabla's deadline or MPI's
# error, whichever OpenMPI delivers first, or mpirun's report of the dead rank).
set -uo pipefail
mode=$1 mpiexec=$2 program=$3
export NABLA_DIST_TIMEOUT=3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 60 "$mpiexec" -np 2 --oversubscribe "$program" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$out"
echo "fault.sh: mode $mode, exit code $rc after ${elapsed} s"
if ((rc == 0)); then echo "FAIL: the job exited 0 although rank 1 failed"; exit 1; fi
if ((rc == 124)); then echo "FAIL: the job hung (killed by timeout 60)"; exit 1; fi
if [[ $mode == stop ]]; then
  grep -q "rank 0: dist::.*DistributedDataParallel gradient bucket.*timed out after 3 s on rank 0 of 2" "$out" ||
    { echo "FAIL: rank 0 did not report the timed-out bucket"; exit 1; }
else
  grep -Eq "rank 0: dist::|rank 1 .*(exited|killed|signal)|process rank 1|exited on signal 9" "$out" ||
    { echo "FAIL: nothing names the failure"; exit 1; }
fi
echo "PASS"
