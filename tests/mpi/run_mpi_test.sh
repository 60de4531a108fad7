#!/usr/bin/env bash
# Runs one MPI test job and judges it by what its ranks report, not by mpirun's exit status.
# Usage: run_mpi_test.sh MPIRUN NP SURVIVORS PROGRAM [ARGS...]
#   NP ranks run PROGRAM; SURVIVORS of them must write "PASS" into their verdict file
#   ($MEMAREA_MPI_TEST_RESULTS/rank-N) and none "FAIL". Every rank that shared memory writes
#   its lease owner to owner-N; after the job, once dead processes' objects were swept
#   (`PROGRAM --gc`, which needs no MPI), no /dev/shm/memarea-* object of those owners may be
#   left.
#   SURVIVORS "exit": a program that writes no verdict (an example, the bench) passes when
#   mpirun's exit status is 0 (every rank exited with 0); no rank may be killed then.
# Extra mpirun options may come in MEMAREA_MPIRUN_EXTRA (space-separated).
set -uo pipefail
mpirun=$1 np=$2 survivors=$3
shift 3
program=$1
# Open MPI's mpirun with --enable-recovery waits out the whole timeout for a program it cannot
# start: a missing one fails here, at once, by name.
if [ ! -x "$program" ] && ! command -v "$program" >/dev/null; then
  echo "FAIL: $program is not an executable program"
  exit 1
fi

flags=()
if "$mpirun" --version 2>&1 | grep -qiE "open ?mpi|openrte|open-mpi"; then
  # Open MPI: more ranks than cores; shared memory only; no CMA (refused in many containers);
  # --enable-recovery keeps the job's other ranks running when one dies (the kill tests),
  # instead of mpirun killing them all.
  flags+=(--oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
  [ "$survivors" = exit ] || flags+=(--enable-recovery)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
fi
# shellcheck disable=SC2206
[ -n "${MEMAREA_MPIRUN_EXTRA:-}" ] && flags+=(${MEMAREA_MPIRUN_EXTRA})

results=$(mktemp -d /tmp/memarea-mpi-test.XXXXXX)
trap 'rm -rf "$results"' EXIT
export MEMAREA_MPI_TEST_RESULTS=$results

echo "\$ $mpirun ${flags[*]} -np $np $*"
start=$(date +%s)
timeout 240 "$mpirun" "${flags[@]}" -x MEMAREA_MPI_TEST_RESULTS -np "$np" "$@" 2>&1 |
  grep -v "PMIX ERROR: BAD-PARAM"  # Open MPI 4.1's noise when a rank dies under recovery
rc=${PIPESTATUS[0]}
echo "mpirun exit status $rc after $(( $(date +%s) - start )) s"

status=0
passed=0
if [ "$survivors" = exit ]; then
  [ "$rc" -eq 0 ] || status=1
  survivors=0
fi
for r in $(seq 0 $((np - 1))); do
  f=$results/rank-$r
  if [ -f "$f" ]; then
    echo "rank $r: $(cat "$f")"
    if grep -q '^PASS' "$f"; then passed=$((passed + 1)); else status=1; fi
  else
    echo "rank $r: no verdict"
  fi
done
if [ "$passed" -ne "$survivors" ]; then
  echo "FAIL: $passed ranks passed, $survivors expected"
  status=1
fi

# What the job's processes left in /dev/shm, once the objects of the dead were swept.
"$program" --gc >/dev/null 2>&1 || true
for f in "$results"/owner-*; do
  [ -f "$f" ] || continue
  owner=$(cat "$f")
  left=$(ls /dev/shm 2>/dev/null | grep -- "^memarea-.*$owner" || true)
  if [ -n "$left" ]; then
    echo "FAIL: /dev/shm objects of owner $owner ($(basename "$f")) left after the job:"
    echo "$left"
    status=1
  fi
done
owners=$(ls "$results" | grep -c '^owner-' || true)
echo "checked /dev/shm for the objects of $owners processes"
[ $status -eq 0 ] && echo "PASS" || echo "FAIL"
exit $status
