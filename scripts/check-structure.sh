#!/usr/bin/env bash
# Checks the layering and size rules (docs/design.md); fails naming each offender.
#
#   (a) src/driver/ includes nothing of src/core/ ("core/..."): the driver layer has no
#       dependency on core.
#   (b) The programs use the public API. The CLI (tools/) includes none of the library's layers
#       ("base/...", "driver/...", "core/...", "capi/..."; `ipc gc` uses the public
#       memarea::ipc::sweep). memarea-bench (bench/src/) includes neither core nor the C API's
#       internals: its raw baselines may use the driver layer ("driver/...", e.g.
#       bench/src/raw_driver.hpp). Spelled with "src/" in front too. The programs' include
#       roots reach the project root (for their shared support code), so the build alone does
#       not refuse such an include: this check does, naming the offender. Left out: tools/hip-nvidia-shim/ (not a client of memarea but a library
#       standing in for the vendor's, HIP's NVIDIA platform as a libamdhip64, whose tests test
#       the HIP driver itself), and bench/'s developer tools and experiments
#       (bench/staging_sweep.cpp, bench/experiments/), which tune memarea's internals and are
#       neither installed nor part of memarea-bench.
#   (c) No source file passes 1,000 lines: C and C++ (sources, headers, .inc), CUDA, Python,
#       CMake, shell. Docs, data and results (*.md, *.json, *.svg, *.txt, ...) are not sources.
#   (d) Core's rooms (src/core/<room>/) include one another in one direction only, as `rooms`
#       below lists (docs/design.md draws it): a room includes its own files, core's root
#       (src/core/*.hpp: system, devices, streams) and the rooms it may name, never one above it.
#       The root includes no room. So pool and memory include nothing of ipc: what they tell
#       IPC goes through the registry's observer (core/memory/memory_observer.hpp). The rooms'
#       own order is checked to have no cycle, and a room the list does not name is refused.
#   (e) The topology measurement (src/topo/, an optional component above core) includes of core
#       only the report's declarations it defines (core/report/report.hpp) and the active
#       driver (core/system.hpp): memarea's copies go through the public API.
#   (f) docs/seeds.md, the tables of the seeds' functions and their tests, names only tests that
#       exist and calls that are declared: scripts/check-seed-tables.sh, whose errors it shows.
#
# Files: what git tracks plus what it does not ignore yet (new files count before their
# commit); a tracked file deleted in the work tree is skipped. Checks the checkout this script
# lies in, or the one given: scripts/check-structure.sh [ROOT]. Plain grep and awk (and python3
# for (f)): a second.
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

# (d) Core's rooms, lowest first: each with the rooms it may include (besides its own files and
# core's root). memory <- pool <- ipc, memory <- managed, memory <- peer <- copy; report (the
# info report) sits above them all.
declare -A rooms=(
  [memory]=""
  [pool]="memory"
  [managed]="memory"
  [peer]="memory"
  [copy]="memory peer"
  [ipc]="memory pool"
  [report]="memory pool managed peer copy ipc"
)

driver_files=() tool_files=() bench_files=() core_files=() topo_files=() sized=()
for f in "${files[@]}"; do
  if is_cxx "$f"; then
    case $f in
      src/core/*) core_files+=("$f") ;;
      src/topo/*) topo_files+=("$f") ;;
    esac
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
  [[ -n $hit ]] && fail "${hit%%:*}: the CLI includes memarea's internals (${hit#*:}); tools/ uses the public API (include/memarea) only"
done < <(include_of 'base|driver|core|capi' "${tool_files[@]}")
while IFS= read -r hit; do
  [[ -n $hit ]] && fail "${hit%%:*}: memarea-bench includes memarea's internals (${hit#*:}); bench/src uses the public API (include/memarea) or, for a raw baseline, the driver layer"
done < <(include_of 'core|capi' "${bench_files[@]}")

# (d) The order itself first: every room it names is listed, and peeling off rooms whose
# allowed rooms are all peeled leaves none (what is left lies on or above a cycle).
for room in "${!rooms[@]}"; do
  for below in ${rooms[$room]}; do
    [[ -z ${rooms[$below]+set} ]] &&
      fail "scripts/check-structure.sh: room $room may include room $below, which the list does not name"
  done
done
declare -A peeled=()
while :; do
  progress=0
  for room in "${!rooms[@]}"; do
    [[ -n ${peeled[$room]:-} ]] && continue
    ready=1
    for below in ${rooms[$room]}; do
      [[ -z ${peeled[$below]:-} ]] && ready=0
    done
    ((ready)) && peeled[$room]=1 && progress=1
  done
  ((progress)) || break
done
for room in "${!rooms[@]}"; do
  [[ -z ${peeled[$room]:-} ]] && fail "scripts/check-structure.sh: room $room lies on or above a cycle of the rooms' order (it may include ${rooms[$room]:-nothing}); rooms include one another one way"
done
# Then every include of core's files.
if ((${#core_files[@]})); then
  while IFS= read -r hit; do
    [[ -z $hit ]] && continue
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest#*:}
    target=$(sed -E 's|^[^"<]*[<"](src/)?core/||; s|[">].*$||' <<<"$line")
    from_dir=${file#src/core/}
    [[ $from_dir == */* ]] && from=${from_dir%%/*} || from=""
    [[ $target == */* ]] && to=${target%%/*} || to=""
    [[ -z $to || $to == "$from" ]] && continue  # core's root, or the room's own files
    if [[ -z $from ]]; then
      fail "$file: core's root includes room $to (${line}); the root (system, devices, streams) lies below every room"
    elif [[ -z ${rooms[$from]+set} ]]; then
      fail "$file: src/core/$from is a room the rules do not name; add it to rooms in scripts/check-structure.sh with the rooms it may include"
    elif [[ " ${rooms[$from]} " != *" $to "* ]]; then
      if [[ $to == ipc && ($from == pool || $from == memory) ]]; then
        fail "$file: room $from includes ipc (${line}); pools and memory know nothing of IPC: tell it through the registry's observer (core/memory/memory_observer.hpp)"
      else
        fail "$file: room $from includes room $to (${line}); $from may include ${rooms[$from]:-no other room} (rooms in scripts/check-structure.sh, docs/design.md)"
      fi
    fi
  done < <(include_of core "${core_files[@]}")
fi

# (e)
while IFS= read -r hit; do
  [[ -z $hit ]] && continue
  [[ $hit =~ [\<\"](src/)?core/(report/report|system)\.hpp[\>\"] ]] && continue
  fail "${hit%%:*}: the topology measurement includes core's internals (${hit#*:*:}); src/topo uses the public API, core/report/report.hpp and core/system.hpp"
done < <(include_of core "${topo_files[@]}")

# (c)
if ((${#sized[@]})); then
  while IFS= read -r line; do
    [[ -n $line ]] && fail "$line"
  done < <(printf '%s\0' "${sized[@]}" | xargs -0 awk -v max="$max_lines" '
    FNR == 1 && NR > 1 { if (n > max) print prev ": " n " lines, more than " max "; split it along its concerns"; n = 0 }
    { n = FNR; prev = FILENAME }
    END { if (n > max) print prev ": " n " lines, more than " max "; split it along its concerns" }')
fi

# (f)
bash scripts/check-seed-tables.sh "$root" >/dev/null ||
  fail "docs/seeds.md names a test or a call that does not exist (check-seed-tables above)"

if ((failed)); then
  echo "check-structure: FAILED (rules: scripts/check-structure.sh's header)" >&2
  exit 1
fi
echo "check-structure: ok (${#files[@]} files; ${#sized[@]} sources at most $max_lines lines)"
