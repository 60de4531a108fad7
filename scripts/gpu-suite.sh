#!/usr/bin/env bash
# Runs every GPU test and benchmark in one call on the lent GPU machine. Usage (on the GPU
# machine, from the repository root):
#   scripts/gpu-suite.sh --kind KIND [BIN_DIR] [RESULTS_ROOT]
# KIND names the machine kind the call asked for (the device tool's kind, e.g. nvidia-h200 or
# nvidia-h200-x2; MEMAREA_SUITE_KIND=KIND does the same): the results go to RESULTS_ROOT/KIND/,
# which holds only the whole log (suite.log) and every bench's rows (bench.json), replaced on
# each run. RESULTS_ROOT is $OUT where that is set (the device machine), else bench/results.
# Back on the developer machine the two files replace bench/results/KIND/'s, and git keeps the
# earlier runs:
#   cp FILES_AT/KIND/suite.log FILES_AT/KIND/bench.json bench/results/KIND/
# The other files a run writes (the repeat runs' JSON, the MPI, Python and HIP benches' JSON,
# topo.svg, the IPC producer's log, ipc-timing.txt) go to MEMAREA_SUITE_EXTRA, by default
# $OUT/gpu-suite-extra/KIND or out/gpu-suite-extra/KIND: their rows are in suite.log too.
# BIN_DIR holds binaries built on the developer machine (scripts/gpu-build.sh puts them in
# out/gpu-bin, which the device tool carries); when it has none, the suite builds here with
# cmake (needs fmt, gtest, CLI11 and nlohmann-json headers, which the GPU image lacks).
# Order: what only the lent GPUs can show comes first (CUDA tests, topo, the benches, MPI), then
# the examples, AML, Python and HIP passes, the sim passes and the benches' repeat runs, so that
# a call cut short by the device budget keeps the rows that need the machine.
# MEMAREA_SUITE_PART=1 runs the CUDA tests, topo and the benches; =2 MPI, the examples, AML and
# the Python package (tests, then benches); =3 HIP, the sim passes and the benches' repeat runs:
# each within one device call on up to four GPUs. Part 1 writes suite.log and bench.json, part 2
# suite-part2.log, part 3 suite-part3.log. Unset (or "all"), everything runs into suite.log.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() {
  echo "usage: scripts/gpu-suite.sh --kind KIND [BIN_DIR] [RESULTS_ROOT]" \
       "(KIND: the machine kind, e.g. nvidia-h200-x2; or MEMAREA_SUITE_KIND=KIND)" >&2
  exit 2
}
KIND=${MEMAREA_SUITE_KIND:-}
case "${1:-}" in
  --kind) [ $# -ge 2 ] || usage; KIND=$2; shift 2 ;;
  --kind=*) KIND=${1#--kind=}; shift ;;
  -h|--help) usage ;;
esac
# A kind is one path component: letters, digits, dots, dashes and underscores.
[[ $KIND =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || usage
PART=${MEMAREA_SUITE_PART:-all}
case "$PART" in all|1|2|3) ;; *) echo "MEMAREA_SUITE_PART must be 1, 2, 3 or all, not '$PART'" >&2; exit 2 ;; esac
in_part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
BIN=${1:-out/gpu-bin}
RES="${2:-${OUT:-bench/results}}/$KIND"
EXTRA=${MEMAREA_SUITE_EXTRA:-${OUT:-out}/gpu-suite-extra/$KIND}
mkdir -p "$RES" "$EXTRA"
in_part 1 && rm -f "$RES/bench.json"  # a bench that fails to write leaves no earlier run's rows behind
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on these shared hosts
# The API suites were built elsewhere and know the helper by its build path: put it there.
if [ -f "$BIN/HELPER_PATH" ] && [ -f "$BIN/memarea_test_helper" ]; then
  mkdir -p "$(dirname "$(cat "$BIN/HELPER_PATH")")"
  cp "$BIN/memarea_test_helper" "$(cat "$BIN/HELPER_PATH")"
fi
# Libraries memarea loads at run time that the image may lack (scripts/gpu-build.sh: runtime/).
[ -d "$BIN/runtime" ] && export LD_LIBRARY_PATH="$PWD/$BIN/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The usage tests run `memarea ps` as a user would: the tool that travelled with the suites.
export MEMAREA_TEST_CLI="$PWD/$BIN/memarea"
# The contract suite (memarea_api_tests) links libmemarea and libmemarea-aml like a user's
# program: they travel beside it in BIN. The white-box suite (memarea_whitebox_tests) is linked
# statically; each runs wherever the other does.
BIN_LIBS="$PWD/$BIN"
LOG="$RES/suite.log"
[ "$PART" = 2 ] && LOG="$RES/suite-part2.log"
[ "$PART" = 3 ] && LOG="$RES/suite-part3.log"
: >"$LOG"
status=0
NO_RESET='--gtest_filter=-DeviceReset*'
ONLY_RESET='--gtest_filter=DeviceReset*'
section() { printf '\n## %s\n\n' "$*" | tee -a "$LOG"; }
run() {  # run a command, keep its output, exit status and wall time in the log
  printf '$ %s\n' "$*" | tee -a "$LOG"
  local started=$SECONDS
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  # The wall time plans the next call's device time (each call has at most 600 s).
  printf '[exit %d after %d s]\n' "$rc" "$((SECONDS - started))" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || status=1
}

section "machine"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "suite part: $PART"
  echo "commit: $(cat "$BIN/COMMIT" 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "host: $(uname -srm)"
  lscpu 2>/dev/null | grep -E "^(CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|Model name)" || true
} | tee -a "$LOG"
run nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,memory.free,driver_version --format=csv
run nvidia-smi topo -m

if in_part 1; then
section "memarea info"
run "$BIN/memarea" info
run "$BIN/memarea" info --json

section "unit tests"
run "$BIN/memarea_unit_tests"
# The device reset's tests run in processes of their own, after the rest: a reset that leaves
# its device unusable fails them alone, not every test after them.
section "API tests on CUDA"
run env "LD_LIBRARY_PATH=$BIN_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/memarea_api_tests" "$NO_RESET"
section "white-box tests on CUDA"
run "$BIN/memarea_whitebox_tests" "$NO_RESET"
section "device reset tests on CUDA (API, then white-box)"
run env "LD_LIBRARY_PATH=$BIN_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/memarea_api_tests" "$ONLY_RESET"
run "$BIN/memarea_whitebox_tests" "$ONLY_RESET"
if "$BIN/memarea" --help 2>&1 | grep -q topo; then
  section "memarea topo"
  # --baseline: the bare driver calls timed the same way in the same run (docs/topo.md).
  # The JSON is kept for the link check below as well as printed into the log.
  run bash -c '"$1" topo --baseline --json --svg "$2" >"$3"; rc=$?; cat "$3"; exit $rc' _ \
      "$BIN/memarea" "$EXTRA/topo.svg" "$EXTRA/topo.json"
  # Every pair's link label as `nvidia-smi topo -m` names it (NV#, PIX/PXB/PHB/NODE/SYS).
  run python3 scripts/check-topo-links.py --json "$EXTRA/topo.json"
fi

section "benchmarks (memarea vs raw driver, same run)"
run "$BIN/memarea-bench" --reps 30 --json "$RES/bench.json"
# The copy rows once more "to the driver call": the entry clock (bench/cuda-entry-clock) first
# on LD_LIBRARY_PATH, in front of the libcuda the loader would find, stamps each cuMemcpyAsync's
# entry (docs/bench.md). Three runs, beside the whole bench's copy rows above (to the return).
if [ -f "$BIN/cuda-entry-clock/libcuda.so.1" ]; then
  real_libcuda=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
  clock_dir=$(cd "$BIN/cuda-entry-clock" && pwd)
  for n in 1 2 3; do
    section "copy rows to the driver's entry (entry clock over ${real_libcuda:-its default})," \
            "run $n of 3"
    run env LD_LIBRARY_PATH="$clock_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ${real_libcuda:+MEMAREA_ENTRY_CLOCK_LIBCUDA="$real_libcuda"} \
        "$BIN/memarea-bench" --filter copy --reps 30 --json "$EXTRA/bench-copy-entry-$n.json"
  done
fi
# What one memory access costs on this host after a thread slept 70 ms: the floor under the IPC
# rows' re-open after a pause (bench/experiments/idle_access_probe.cpp).
if [ -x "$BIN/idle_access_probe" ]; then
  section "idle-access probe (this host's cost of touching memory after 70 ms asleep)"
  run "$BIN/idle_access_probe"
fi
# The driver's first open of another process's allocation: 2 MiB and 202 MiB, legacy IPC and
# VMM file descriptors (bench/experiments/vmm_import_cost.cpp): the bound under the pool's IPC row.
if [ -x "$BIN/vmm_import_cost" ]; then
  section "driver open cost by size and sharing (legacy IPC, VMM descriptors)"
  run "$BIN/vmm_import_cost" 12
fi
# Calls on a named stream with another device's context, or none, current; the cost of asking
# for the current context (bench/experiments/stream_context_calls.cpp): docs/bench.md.
if [ -x "$BIN/stream_context_calls" ] && [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  section "named-stream calls and the current context"
  run "$BIN/stream_context_calls"
fi

fi  # part 1

if in_part 2; then

# libmemarea_mpi (docs/mpi.md): the sim CI's MPI tests on CUDA with 2 ranks (both on device 0
# of one GPU; 3 where a rank is killed, so that two survive), the example, then the bench.
# tests/mpi/run_mpi_test.sh judges each rank's verdict and checks /dev/shm after each job.
if [ -x "$BIN/memarea_mpi_tests" ] && command -v mpirun >/dev/null; then
  mpi_env=(env MEMAREA_BACKEND=cuda "LD_LIBRARY_PATH=$PWD/$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  mpi_run=("${mpi_env[@]}" tests/mpi/run_mpi_test.sh "$(command -v mpirun)")
  section "MPI windows on CUDA (tests/mpi, 2 ranks)"
  run "${mpi_run[@]}" 2 2 "$BIN/memarea_mpi_tests" window
  run "${mpi_run[@]}" 2 2 "$BIN/memarea_mpi_tests" fail_open
  for at in arrive exchange open fence destroy; do
    run "${mpi_run[@]}" 3 2 "$BIN/memarea_mpi_tests" kill "$at"
  done
  run "${mpi_run[@]}" 2 2 "$BIN/memarea_mpi_tests" late
  run "${mpi_run[@]}" 2 2 "$BIN/memarea_mpi_tests" mismatch
  run "${mpi_run[@]}" 3 3 "$BIN/memarea_mpi_protocol_tests" records
  run "${mpi_run[@]}" 3 3 "$BIN/memarea_mpi_tests" bad_record
  run "${mpi_run[@]}" 3 3 "$BIN/memarea_mpi_tests" version
  run env MEMAREA_MPI_TEST_NODES=2 "${mpi_run[@]}" 4 4 "$BIN/memarea_mpi_tests" window
  run "${mpi_run[@]}" 2 2 "$BIN/memarea_mpi_c_test"
  run "${mpi_run[@]}" 2 exit "$BIN/example_mpi_halo" --steps 100
  # The bench lets MPI choose its own transports (a CUDA-aware Open MPI needs its smcuda BTL).
  mpi_flags=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
  section "MPI bench on CUDA (memarea-bench-mpi, 2 ranks)"
  run "${mpi_env[@]}" mpirun "${mpi_flags[@]}" -np 2 "$BIN/memarea-bench-mpi" --reps 30 \
      --json "$EXTRA/bench-mpi.json"
  # Opt-in (MEMAREA_SUITE_MPS=1): the bench again with both ranks as clients of a CUDA MPS
  # server, which runs the processes' work in one GPU context instead of switching between
  # their contexts. The daemon is this run's own (pipe and log directories under /tmp), and
  # is told to quit afterwards; the card's settings are not touched.
  if [ "${MEMAREA_SUITE_MPS:-0}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
    section "MPI bench on CUDA under MPS (opt-in experiment)"
    mps_dir=$(mktemp -d /tmp/memarea-mps.XXXXXX)
    export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if timeout 20 nvidia-cuda-mps-control -d; then
      run timeout 240 "${mpi_env[@]}" mpirun "${mpi_flags[@]}" -x CUDA_MPS_PIPE_DIRECTORY \
          -x CUDA_MPS_LOG_DIRECTORY -np 2 "$BIN/memarea-bench-mpi" --quick \
          --json "$EXTRA/bench-mpi-mps.json"
      echo quit | timeout 20 nvidia-cuda-mps-control || echo "MPS: quit failed" | tee -a "$LOG"
      cp "$CUDA_MPS_LOG_DIRECTORY/control.log" "$EXTRA/mps-control.log" 2>/dev/null || true
    else
      echo "MPS: the control daemon did not start" | tee -a "$LOG"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    rm -rf "$mps_dir"
  fi
  # Four GPUs or more: 4 ranks, one per GPU (the window's default device is node rank % device
  # count), then 8 ranks on the first four GPUs, two per GPU. The bench's 8-rank run puts node
  # ranks two at a time on a device (--ranks-per-device 2), so that each rank has a neighbour
  # on its own device and one on the next: its targets within the device and over the links
  # both apply; with 4 ranks every neighbour is on another device, and the bench says the
  # in-device target is n/a for that layout.
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$ngpu" -ge 4 ]; then
    section "MPI windows on CUDA (tests/mpi, 4 ranks, one per GPU)"
    run "${mpi_run[@]}" 4 4 "$BIN/memarea_mpi_tests" window
    run "${mpi_run[@]}" 4 4 "$BIN/memarea_mpi_c_test"
    run "${mpi_run[@]}" 4 exit "$BIN/example_mpi_halo" --steps 100
    section "MPI bench on CUDA (memarea-bench-mpi, 4 ranks, one per GPU)"
    run "${mpi_env[@]}" mpirun "${mpi_flags[@]}" -np 4 "$BIN/memarea-bench-mpi" --reps 10 \
        --json "$EXTRA/bench-mpi-4.json"
    mpi_four=("${mpi_env[@]}" CUDA_VISIBLE_DEVICES=0,1,2,3)
    mpi_run8=("${mpi_four[@]}" tests/mpi/run_mpi_test.sh "$(command -v mpirun)")
    section "MPI windows on CUDA (tests/mpi, 8 ranks, two per GPU on GPUs 0-3)"
    run "${mpi_run8[@]}" 8 8 "$BIN/memarea_mpi_tests" window
    run "${mpi_run8[@]}" 8 8 "$BIN/memarea_mpi_c_test"
    run "${mpi_run8[@]}" 8 exit "$BIN/example_mpi_halo" --steps 100
    section "MPI bench on CUDA (memarea-bench-mpi, 8 ranks, two per GPU on GPUs 0-3)"
    run "${mpi_four[@]}" mpirun "${mpi_flags[@]}" -np 8 "$BIN/memarea-bench-mpi" --reps 10 \
        --ranks-per-device 2 --json "$EXTRA/bench-mpi-8.json"
  fi
else
  section "MPI windows"
  echo "NOT RUN: no $BIN/memarea_mpi_tests (MPI not found at build time) or no mpirun here" | tee -a "$LOG"
fi

if [ -x "$BIN/example_ipc_producer" ]; then
  section "examples on CUDA (IPC producer and consumer as two processes)"
  export LD_LIBRARY_PATH="$PWD/$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  handle=$(mktemp -u /tmp/memarea-handle.XXXXXX)
  "$BIN/example_ipc_producer" "$handle" >"$EXTRA/producer.log" 2>&1 &
  producer=$!
  run timeout 60 "$BIN/example_ipc_consumer" "$handle"
  wait "$producer"; rc=$?
  cat "$EXTRA/producer.log" | tee -a "$LOG"
  printf '[producer exit %d]\n' "$rc" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || status=1
  for e in area area_c area_aml aml_allocator managed host_numa pool; do
    [ -x "$BIN/example_$e" ] && run "$BIN/example_$e"
  done
fi

if compgen -G "$BIN/aml_test_*" >/dev/null; then
  section "AML drop-in tests on CUDA (tests/aml: AML programs on libmemarea-aml)"
  for t in "$BIN"/aml_test_*; do
    LD_LIBRARY_PATH="$PWD/$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" run "$t"
  done
fi

# The Python package (python/, docs/python.md) with the image's python3 (PyTorch, CuPy, JAX):
# the CI suite on CUDA plus the interop and framework-allocator tests, the example (two
# processes), then the benches (per call; PyTorch with memarea's allocator against its own).
if [ -d "$BIN/python/memarea" ] && command -v python3 >/dev/null; then
  py=(env MEMAREA_BACKEND=cuda "MEMAREA_LIBRARY=$PWD/$BIN/libmemarea.so.0"
      "PYTHONPATH=$PWD/$BIN/python" PYTHONDONTWRITEBYTECODE=1)
  section "Python package on CUDA (pytest $BIN/python/tests)"
  run "${py[@]}" timeout 900 python3 -m pytest -q -rs -p no:cacheprovider "$BIN/python/tests" \
      --ignore "$BIN/python/tests/test_device_reset.py"
  run "${py[@]}" timeout 300 python3 -m pytest -q -rs -p no:cacheprovider \
      "$BIN/python/tests/test_device_reset.py"
  # ctypes alone on the image's Python (3.12+): the only place the pure path's buffer protocol
  # (PEP 688) runs, since CI's Python 3.11 has none on that path.
  section "Python package on CUDA, ctypes alone (MEMAREA_PYTHON_PURE=1)"
  run "${py[@]}" MEMAREA_PYTHON_PURE=1 timeout 300 python3 -m pytest -q -rs -p no:cacheprovider \
      "$BIN/python/tests/test_native.py" "$BIN/python/tests/test_buffers.py"
  section "Python example: a torch tensor's memory shared with another process"
  run "${py[@]}" timeout 300 python3 "$BIN/python/examples/share_tensor.py"
  section "Python bench (per call; torch.empty and cupy.empty in the same run)"
  run "${py[@]}" timeout 600 python3 "$BIN/python/bench/bench_python.py" --json "$EXTRA/bench-python.json"
  section "PyTorch with memarea's allocator against its own (python/bench/bench_frameworks.py)"
  run "${py[@]}" timeout 1200 python3 "$BIN/python/bench/bench_frameworks.py" --json "$EXTRA/bench-frameworks.json"
else
  section "Python package"
  echo "NOT RUN: no $BIN/python/memarea (scripts/gpu-build.sh copies it) or no python3" | tee -a "$LOG"
  status=1
fi
fi  # part 2

if in_part 3; then

# The HIP backend, over HIP's NVIDIA platform built into a libamdhip64.so.5 (tools/hip-nvidia-shim,
# docs/hip-nvidia.md): the same API suite a second time, through memarea's HIP code paths on these
# NVIDIA GPUs. It proves HIP calls, layouts and error mapping, not AMD hardware behaviour.
HIP_SHIM="$PWD/$BIN/hip-nvidia"
if [ -f "$HIP_SHIM/libamdhip64.so.5" ]; then
  # env(1) on each command, so that the log shows how it ran and nothing else inherits it.
  hip=(env MEMAREA_BACKEND=hip "LD_LIBRARY_PATH=$HIP_SHIM:$BIN_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  section "memarea info on HIP (HIP's NVIDIA platform, $HIP_SHIM)"
  run "${hip[@]}" "$BIN/memarea" info
  run "${hip[@]}" "$BIN/memarea" info --json
  section "API tests on HIP over HIP's NVIDIA platform"
  run "${hip[@]}" "$BIN/memarea_api_tests" "$NO_RESET"
  section "white-box tests on HIP over HIP's NVIDIA platform"
  run "${hip[@]}" "$BIN/memarea_whitebox_tests" "$NO_RESET"
  section "device reset tests on HIP over HIP's NVIDIA platform (API, then white-box)"
  run "${hip[@]}" "$BIN/memarea_api_tests" "$ONLY_RESET"
  run "${hip[@]}" "$BIN/memarea_whitebox_tests" "$ONLY_RESET"
  section "benchmark on HIP over HIP's NVIDIA platform (area; raw = the HIP driver layer)"
  run "${hip[@]}" "$BIN/memarea-bench" --filter area --reps 10 --json "$EXTRA/bench-hip-area.json"
else
  section "HIP over HIP's NVIDIA platform"
  echo "NOT RUN: no $BIN/hip-nvidia/libamdhip64.so.5 (scripts/gpu-build.sh builds it)" | tee -a "$LOG"
  status=1
fi

section "API tests on sim (4 devices, peer groups) on the same machine"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=4 MEMAREA_SIM_PEER_GROUPS="0,1;2,3" \
  run env "LD_LIBRARY_PATH=$BIN_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/memarea_api_tests"
section "white-box tests on sim (4 devices, peer groups) on the same machine"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=4 MEMAREA_SIM_PEER_GROUPS="0,1;2,3" \
  run "$BIN/memarea_whitebox_tests"

section "API tests on sim (8 devices) on the same machine"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=8 MEMAREA_SIM_DEVICE_MEMORY=64M \
  run env "LD_LIBRARY_PATH=$BIN_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/memarea_api_tests"
section "white-box tests on sim (8 devices) on the same machine"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=8 MEMAREA_SIM_DEVICE_MEMORY=64M \
  run "$BIN/memarea_whitebox_tests"

# Pools: a second run of their case alone (docs/pools.md quotes both).
section "pool benchmark, run 2 of 2"
run "$BIN/memarea-bench" --filter pool --reps 30 --json "$EXTRA/bench-pool-2.json"
# IPC's targets are judged over at least three runs: two more of its case alone
# (MEMAREA_SUITE_IPC_RUNS=1 skips them where device time is short).
for n in $(seq 2 "${MEMAREA_SUITE_IPC_RUNS:-3}"); do
  section "IPC benchmark, run $n of 3"
  run "$BIN/memarea-bench" --filter ipc --json "$EXTRA/bench-ipc-$n.json"
done
# Where a first import's time goes (docs/ipc.md): the IPC bench once more, quick, with every
# first open printing its phases (printing slows the opens that print: its rows are not
# quoted). The phase lines go to ipc-timing.txt too.
section "IPC first-open phases (MEMAREA_IPC_TIMING=1, quick IPC bench; rows not quoted)"
run env MEMAREA_IPC_TIMING=1 "$BIN/memarea-bench" --filter ipc --quick
grep "memarea ipc timing:" "$LOG" > "$EXTRA/ipc-timing.txt" || true

section "memarea ipc gc (what dead processes left in /dev/shm)"
run "$BIN/memarea" ipc gc
fi  # part 3

section "summary"
echo "suite status (part $PART): $([ $status -eq 0 ] && echo PASS || echo FAIL)" | tee -a "$LOG"
exit $status
