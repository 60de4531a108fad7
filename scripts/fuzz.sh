#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, clang with ASan+UBSan; the whole library carries
# libFuzzer's coverage instrumentation) and runs each of them.
#   scripts/fuzz.sh --ci     each harness for FUZZ_SECONDS (default 40) seconds (CI runs this)
#   scripts/fuzz.sh --long   each harness for at least 1,000,000 executions
# A crash, a leak, an out-of-mapping pointer or a hang fails the run; its input is kept in
# build/fuzz/artifacts/. Logs: build/fuzz/logs/<harness>.log (the executions are in the last line).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---ci}
case "$mode" in
  --ci) limit=(-max_total_time="${FUZZ_SECONDS:-40}") ;;
  --long) limit=(-runs=1000000) ;;
  *) echo "usage: $0 [--ci|--long]" >&2; exit 2 ;;
esac
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMEMAREA_SANITIZE=address,undefined \
  -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
  -DMEMAREA_FUZZ=ON -DMEMAREA_BUILD_TESTS=OFF -DMEMAREA_BUILD_TOOLS=OFF \
  -DMEMAREA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target fuzz_handle fuzz_recv_fd fuzz_config
mkdir -p build/fuzz/artifacts build/fuzz/logs
status=0
for h in handle recv_fd config; do
  mkdir -p "build/fuzz/corpus/$h"
  echo "fuzz_$h (${limit[*]})"
  if ! build/fuzz/tests/fuzz/fuzz_$h "build/fuzz/corpus/$h" "${limit[@]}" -timeout=20 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$h- \
      >"build/fuzz/logs/$h.log" 2>&1; then
    status=1
    echo "fuzz_$h FAILED:"
    tail -40 "build/fuzz/logs/$h.log"
  fi
  grep -E "^stat::number_of_executed_units|^Done " "build/fuzz/logs/$h.log" || true
done
[ "$status" -eq 0 ] && echo "fuzz: every harness ran clean" || echo "fuzz: a harness failed"
exit "$status"
