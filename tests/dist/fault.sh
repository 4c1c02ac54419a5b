#!/usr/bin/env bash
# fault.sh MODE MPIEXEC PROGRAM: runs dist_fault_peer on 2 ranks; rank 1 fails at step 3.
#   stop          rank 1 stops (SIGSTOP: a hung peer). Rank 0 must hit nabla's deadline, say which
#                 collective timed out, exit non-zero, and its MPI_Abort must end the job.
#   kill          rank 1 dies (SIGKILL) under `mpiexec --enable-recovery`, which leaves rank 0
#                 running: nabla's own deadline must end it, with the message and a non-zero exit.
#   kill-runtime  rank 1 dies under a plain mpiexec: OpenMPI's runtime ends the job itself (rank 0
#                 is killed, mpiexec names the dead rank and exits non-zero).
# Each must finish well within the outer 60 s limit (NABLA_DIST_TIMEOUT=3 here).
set -uo pipefail
mode=$1 mpiexec=$2 program=$3
export NABLA_DIST_TIMEOUT=3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
signal=stop extra=()
case $mode in
  stop) ;;
  kill) signal=kill extra=(--enable-recovery) ;;
  kill-runtime) signal=kill ;;
  *) echo "usage: fault.sh stop|kill|kill-runtime MPIEXEC PROGRAM"; exit 2 ;;
esac
start=$(date +%s)
if [[ $mode == kill-runtime ]]; then
  timeout 60 "$mpiexec" -np 2 --oversubscribe "$program" "$signal" >"$out" 2>&1
  rc=$?
else
  # The sh wrapper reports each rank's own exit code (mpiexec's depends on the mode).
  timeout 60 "$mpiexec" -np 2 --oversubscribe "${extra[@]}" \
    sh -c '"$0" "$1"; echo "rank $OMPI_COMM_WORLD_RANK exit code $?"' "$program" "$signal" \
    >"$out" 2>&1
  rc=$?
fi
elapsed=$(($(date +%s) - start))
grep -v " step " "$out"
echo "fault.sh: mode $mode, mpiexec exit code $rc after ${elapsed} s"
fail() { echo "FAIL: $*"; exit 1; }
((rc != 124)) || fail "the job hung (killed by timeout 60)"
((elapsed < 40)) || fail "took ${elapsed} s"
if [[ $mode == kill-runtime ]]; then
  ((rc != 0)) || fail "mpiexec exited 0 although rank 1 died"
  grep -q "process rank 1 .*exited on signal 9" "$out" || fail "mpiexec did not name rank 1"
else
  grep -q "rank 0: dist::DistributedDataParallel gradient bucket 0 .*timed out after 3 s on rank 0 of 2" "$out" ||
    fail "rank 0 did not report the timed-out bucket"
  grep -q "rank 0 exit code [1-9]" "$out" || fail "rank 0 did not exit non-zero"
fi
[[ $mode != stop ]] || ((rc != 0)) || fail "mpiexec exited 0 after rank 0's MPI_Abort"
echo "PASS"
