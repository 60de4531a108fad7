#!/usr/bin/env bash
# Checks the layering and size rules (docs/design.md); fails naming each offender.
#
#   (a) src/driver/ includes nothing of src/core/ ("core/..."): the driver layer has no
#       dependency on core.
#   (b) The programs use the public API. The CLI (tools/) includes nothing of the driver, core
#       or the C API's internals ("driver/...", "core/...", "capi/..."; `ipc gc` uses the base
#       layer's lease). memarea-bench (bench/src/) includes neither core nor the C API's
#       internals: its raw baselines may use the driver layer ("driver/...", e.g.
#       bench/src/raw_driver.hpp). Spelled with "src/" in front too. The build holds the same
#       line (each program sees only its layers' include roots, src/CMakeLists.txt); this names
#       the offender. Left out: tools/hip-nvidia-shim/ (not a client of memarea but a library
#       standing in for the vendor's, HIP's NVIDIA platform as a libamdhip64, whose tests test
#       the HIP driver itself), and bench/'s developer tools and experiments
#       (bench/staging_sweep.cpp, bench/experiments/), which tune memarea's internals and are
#       neither installed nor part of memarea-bench.
#   (c) No source file passes 1,000 lines: C and C++ (sources, headers, .inc), CUDA, Python,
#       CMake, shell. Docs, data and results (*.md, *.json, *.svg, *.txt, ...) are not sources.
#
# Files: what git tracks plus what it does not ignore yet (new files count before their
# commit); a tracked file deleted in the work tree is skipped. Checks the checkout this script
# lies in, or the one given: scripts/check-structure.sh [ROOT]. Plain grep and awk: a second.
set -euo pipefail

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
cd "$root"
readonly max_lines=1000

files=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] && files+=("$f")
done < <(git ls-files -z --cached --others --exclude-standard | sort -zu)

failed=0
fail() {
  echo "check-structure: $*" >&2
  failed=1
}

is_cxx() { [[ $1 =~ \.(c|cc|cpp|cxx|h|hh|hpp|hxx|inc|cu|cuh)$ ]]; }

# An #include line naming one of the given top directories, in either quote style, with or
# without "src/" in front.
include_of() {  # dirs (a regex alternation), files...
  local dirs=$1
  shift
  (($# == 0)) && return 0
  grep -HnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"](src/)?($dirs)/" -- "$@" || true
}

driver_files=() tool_files=() bench_files=() sized=()
for f in "${files[@]}"; do
  if is_cxx "$f"; then
    case $f in
      src/driver/*) driver_files+=("$f") ;;
      tools/hip-nvidia-shim/*) ;;
      tools/*) tool_files+=("$f") ;;
      bench/src/*) bench_files+=("$f") ;;
    esac
  fi
  if is_cxx "$f" || [[ $f =~ \.(py|cmake|sh|bash)$ || $f =~ \.cmake\.in$ ||
                        $(basename "$f") == CMakeLists.txt ]]; then
    sized+=("$f")
  fi
done

# (a)
while IFS= read -r hit; do
  [[ -n $hit ]] && fail "${hit%%:*}: the driver layer includes core (${hit#*:}); src/driver must not depend on src/core"
done < <(include_of core "${driver_files[@]}")

# (b)
while IFS= read -r hit; do
  [[ -n $hit ]] && fail "${hit%%:*}: the CLI includes memarea's internals (${hit#*:}); tools/ uses the public API (include/memarea) and the base layer"
done < <(include_of 'driver|core|capi' "${tool_files[@]}")
while IFS= read -r hit; do
  [[ -n $hit ]] && fail "${hit%%:*}: memarea-bench includes memarea's internals (${hit#*:}); bench/src uses the public API (include/memarea) or, for a raw baseline, the driver layer"
done < <(include_of 'core|capi' "${bench_files[@]}")

# (c)
if ((${#sized[@]})); then
  while IFS= read -r line; do
    [[ -n $line ]] && fail "$line"
  done < <(printf '%s\0' "${sized[@]}" | xargs -0 awk -v max="$max_lines" '
    FNR == 1 && NR > 1 { if (n > max) print prev ": " n " lines, more than " max "; split it along its concerns"; n = 0 }
    { n = FNR; prev = FILENAME }
    END { if (n > max) print prev ": " n " lines, more than " max "; split it along its concerns" }')
fi

if ((failed)); then
  echo "check-structure: FAILED (rules: scripts/check-structure.sh's header)" >&2
  exit 1
fi
echo "check-structure: ok (${#files[@]} files; ${#sized[@]} sources at most $max_lines lines)"
