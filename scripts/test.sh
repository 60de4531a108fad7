#!/usr/bin/env bash
# Runs the whole test suite (default preset) after building it; `--asan` / `--tsan` run the
# sanitizer presets' suites instead, and `--asan-fork` the fork tests under clang 19's ASan
# (CMakePresets.json says why).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=default
case "${1:-}" in
  --asan) preset=asan ;;
  --tsan) preset=tsan ;;
  --asan-fork) preset=asan-fork ;;
  "") ;;
  *) echo "usage: $0 [--asan|--tsan|--asan-fork]" >&2; exit 2 ;;
esac
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
