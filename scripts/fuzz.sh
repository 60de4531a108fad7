#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, clang with ASan+UBSan; the whole library carries
# libFuzzer's coverage instrumentation) and runs each of them.
#   scripts/fuzz.sh --ci     each harness for FUZZ_SECONDS (default 40) seconds (CI runs this)
#   scripts/fuzz.sh --long   each harness for at least 1,000,000 executions
# A crash, a leak, an out-of-mapping pointer or a hang fails the run; its input is kept in
# build/fuzz/artifacts/. Logs: build/fuzz/logs/<harness>.log (the executions are in the last line).
# FUZZ_BUILD_DIR builds elsewhere than build/fuzz (a second checkout's own directory).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---ci}
case "$mode" in
  --ci) limit=(-max_total_time="${FUZZ_SECONDS:-40}") ;;
  --long) limit=(-runs=1000000) ;;
  *) echo "usage: $0 [--ci|--long]" >&2; exit 2 ;;
esac
dir=${FUZZ_BUILD_DIR:-build/fuzz}
harnesses=(handle recv_fd config mpi_record segment lease_table)
# Flags of one harness. segment: libFuzzer's SIGBUS handler would replace memarea's fault guard
# without chaining to it, and a file cut short under a mapping is what that harness tests.
declare -A extra=([segment]="-handle_bus=0")
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMEMAREA_SANITIZE=address,undefined \
  -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
  -DMEMAREA_FUZZ=ON -DMEMAREA_BUILD_TESTS=OFF -DMEMAREA_BUILD_TOOLS=OFF \
  -DMEMAREA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${harnesses[@]/#/fuzz_}"
mkdir -p "$dir/artifacts" "$dir/logs"
status=0
for h in "${harnesses[@]}"; do
  mkdir -p "$dir/corpus/$h"
  # Seeds, where a harness has them, are read as a second corpus (new inputs go to the first).
  seeds=()
  if [ -d "tests/fuzz/seeds/$h" ]; then seeds=("tests/fuzz/seeds/$h"); fi
  echo "fuzz_$h (${limit[*]})"
  # shellcheck disable=SC2086  # the extra flags are words
  if ! "$dir/tests/fuzz/fuzz_$h" "$dir/corpus/$h" "${seeds[@]}" "${limit[@]}" ${extra[$h]:-} \
      -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$h-" \
      >"$dir/logs/$h.log" 2>&1; then
    status=1
    echo "fuzz_$h FAILED:"
    tail -40 "$dir/logs/$h.log"
  fi
  grep -E "^stat::number_of_executed_units|^Done " "$dir/logs/$h.log" || true
done
[ "$status" -eq 0 ] && echo "fuzz: every harness ran clean" || echo "fuzz: a harness failed"
exit "$status"
