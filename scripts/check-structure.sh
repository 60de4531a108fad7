#!/usr/bin/env bash
# Checks the layering and size rules (docs/design.md); fails naming each offender.
#
#   (a) src/driver/ includes nothing of src/core/: the driver layer has no dependency on core.
#   (b) The programs use the public API. The CLI (tools/) includes none of the library's layers
#       (src/base, src/driver, src/core, src/capi; `ipc gc` uses the public
#       memarea::ipc::sweep). memarea-bench (bench/src/) includes neither core nor the C API's
#       internals: its raw baselines may use the driver layer (e.g. bench/src/raw_driver.hpp).
#       The programs' include roots reach the project root (for their shared support code), so
#       the build alone does not refuse such an include: this check does, naming the offender.
#       Left out: tools/hip-nvidia-shim/ (not a client of memarea but a library standing in for
#       the vendor's, HIP's NVIDIA platform as a libamdhip64, whose tests test the HIP driver
#       itself), and bench/'s developer tools and experiments (bench/staging_sweep.cpp,
#       bench/experiments/), which tune memarea's internals and are neither installed nor part
#       of memarea-bench.
#   (c) No source file passes 700 lines: C and C++ (sources, headers, .inc), CUDA, Python,
#       CMake, shell. Docs, data and results (*.md, *.json, *.svg, *.txt, *.log, ...) are not
#       sources. Nothing generated or vendored lies among the sources, so none is left out;
#       a file whose split is under way elsewhere is listed in `splitting` below with the length
#       it may not pass, and an entry whose file is back under the limit fails (delete it).
#   (d) Core's rooms (src/core/<room>/) include one another in one direction only, as `rooms`
#       below lists (docs/design.md draws it): a room includes its own files, core's root
#       (src/core/*.hpp: system, devices, streams) and the rooms it may name, never one above it.
#       The root includes no room. So pool and memory include nothing of ipc: what they tell
#       IPC goes through the registry's observer (core/memory/memory_observer.hpp). The rooms'
#       own order is checked to have no cycle, and a room the list does not name is refused.
#   (e) The topology measurement (src/topo/, an optional component above core) includes of core
#       only the report's declarations it defines (src/core/report/report.hpp) and the active
#       driver (src/core/system.hpp): memarea's copies go through the public API.
#   (f) docs/seeds.md, the tables of the seeds' functions and their tests, names only tests that
#       exist and calls that are declared: scripts/check-seed-tables.sh, whose errors it shows.
#
# An include is judged by the file it names, found as the compiler finds it: a quoted include
# beside the including file first ("../ipc/x.hpp", "ipc/x.hpp" from core's root), then under
# the include roots the build gives: the project root (the programs reach "src/..." through
# it), src/ (a layer's include root holds a link named after the layer, so "core/x.hpp" is
# src/core/x.hpp) and include/ (the public API). An include that names no file of the checkout
# (a system header, a file not made yet) is judged by its text: "core/..." or "src/core/..."
# is src/core/... .
#
# Files: what git tracks plus what it does not ignore yet (new files count before their
# commit); a tracked file deleted in the work tree is skipped. Checks the checkout this script
# lies in, or the one given: scripts/check-structure.sh [ROOT]. Bash, grep and awk (and python3
# for (f)): a second.
set -euo pipefail

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
cd "$root"
readonly max_lines=700

# (c) Files over the limit whose split into files of one concern each is under way on another
# branch: each may not grow past the length given here.
declare -A splitting=()

files=()
declare -A in_tree=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] && files+=("$f") && in_tree[$f]=1
done < <(git ls-files -z --cached --others --exclude-standard | sort -zu)

failed=0
fail() {
  echo "check-structure: $*" >&2
  failed=1
}

is_cxx() { [[ $1 =~ \.(c|cc|cpp|cxx|h|hh|hpp|hxx|inc|cu|cuh)$ ]]; }

# REPLY: path with "." and ".." taken out ("" when it climbs above the checkout).
normalize() {
  local part
  local -a parts out=()
  IFS=/ read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    case $part in
      '' | .) ;;
      ..)
        ((${#out[@]})) || { REPLY="" && return; }
        out=("${out[@]:0:${#out[@]}-1}")
        ;;
      *) out+=("$part") ;;
    esac
  done
  local IFS=/
  REPLY="${out[*]}"
}

# REPLY: the file of the checkout that `#include <quote><name>` in file `from` names (see the
# header), else the path its text spells under src/ for a layer ("" for anything else).
resolve() {  # from quote name
  local from=$1 quote=$2 name=$3 dir r
  if [[ $quote == '"' ]]; then
    [[ $from == */* ]] && dir=${from%/*} || dir=.
    normalize "$dir/$name"
    [[ -n $REPLY && -n ${in_tree[$REPLY]:-} ]] && return
  fi
  for r in . src include; do
    normalize "$r/$name"
    [[ -n $REPLY && -n ${in_tree[$REPLY]:-} ]] && return
  done
  if [[ $name =~ ^(src/)?((base|driver|core|capi|topo|testing)/.*)$ ]]; then
    normalize "src/${BASH_REMATCH[2]}"
  else
    REPLY=""
  fi
}

# Every #include of the given files, one a line: "file<TAB>line number<TAB>the file it names
# (resolve; may be empty)<TAB>the line".
includes_of() {  # files...
  (($# == 0)) && return 0
  local hit file rest lineno line
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    lineno=${rest%%:*}
    line=${rest#*:}
    [[ $line =~ include[[:space:]]*([\"\<])([^\"\>]+)[\"\>] ]] || continue
    resolve "$file" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    printf '%s\t%s\t%s\t%s\n' "$file" "$lineno" "$REPLY" "$line"
  done < <(grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' -- "$@" || true)
}

# The includes of the given files that name a file under one of the given directories of src/
# (a regex alternation), in includes_of's form.
includes_under() {  # dirs files...
  local dirs=$1
  shift
  includes_of "$@" | awk -F'\t' -v re="^src/($dirs)/" '$3 ~ re'
}

# "file: ... (the line)" for a message, naming the file resolved to when the text does not.
where() {  # file lineno target line
  local shown=$4
  [[ $4 == *"$3"* ]] || shown="$4 -> $3"
  REPLY="$1:$2: ${shown}"
}

# (d) Core's rooms, lowest first: each with the rooms it may include (besides its own files and
# core's root). memory <- pool <- ipc, memory <- managed, memory <- peer <- copy; report (the
# info report) sits above them all, and so does device (the device reset), which checks and
# releases what each room below holds in a device's context before the driver destroys it.
declare -A rooms=(
  [memory]=""
  [pool]="memory"
  [managed]="memory"
  [peer]="memory"
  [copy]="memory peer"
  [ipc]="memory pool"
  [report]="memory pool managed peer copy ipc"
  [device]="memory pool peer copy ipc"
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
while IFS=$'\t' read -r file lineno target line; do
  where "$file" "$lineno" "$target" "$line"
  fail "$REPLY: the driver layer includes core; src/driver must not depend on src/core"
done < <(includes_under core "${driver_files[@]}")

# (b)
while IFS=$'\t' read -r file lineno target line; do
  where "$file" "$lineno" "$target" "$line"
  fail "$REPLY: the CLI includes memarea's internals; tools/ uses the public API (include/memarea) only"
done < <(includes_under 'base|driver|core|capi' "${tool_files[@]}")
while IFS=$'\t' read -r file lineno target line; do
  where "$file" "$lineno" "$target" "$line"
  fail "$REPLY: memarea-bench includes memarea's internals; bench/src uses the public API (include/memarea) or, for a raw baseline, the driver layer"
done < <(includes_under 'core|capi' "${bench_files[@]}")

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
# Then every include of core's files that names a file of core.
room_of() {  # a path under src/core/ -> REPLY: its room, "" for core's root
  local rel=${1#src/core/}
  [[ $rel == */* ]] && REPLY=${rel%%/*} || REPLY=""
}
while IFS=$'\t' read -r file lineno target line; do
  room_of "$file"
  from=$REPLY
  room_of "$target"
  to=$REPLY
  [[ -z $to || $to == "$from" ]] && continue  # core's root, or the room's own files
  where "$file" "$lineno" "$target" "$line"
  if [[ -z $from ]]; then
    fail "$REPLY: core's root includes room $to; the root (system, devices, streams) lies below every room"
  elif [[ -z ${rooms[$from]+set} ]]; then
    fail "$file: src/core/$from is a room the rules do not name; add it to rooms in scripts/check-structure.sh with the rooms it may include"
  elif [[ " ${rooms[$from]} " != *" $to "* ]]; then
    if [[ $to == ipc && ($from == pool || $from == memory) ]]; then
      fail "$REPLY: room $from includes ipc; pools and memory know nothing of IPC: tell it through the registry's observer (core/memory/memory_observer.hpp)"
    else
      fail "$REPLY: room $from includes room $to; $from may include ${rooms[$from]:-no other room} (rooms in scripts/check-structure.sh, docs/design.md)"
    fi
  fi
done < <(includes_under core "${core_files[@]}")

# (e) The two files by their paths, whatever the include's text around them.
while IFS=$'\t' read -r file lineno target line; do
  [[ $target == src/core/report/report.hpp || $target == src/core/system.hpp ]] && continue
  where "$file" "$lineno" "$target" "$line"
  fail "$REPLY: the topology measurement includes core's internals; src/topo uses the public API, src/core/report/report.hpp and src/core/system.hpp"
done < <(includes_under core "${topo_files[@]}")

# (c)
for f in "${!splitting[@]}"; do
  [[ -n ${in_tree[$f]:-} ]] || fail "scripts/check-structure.sh: $f, listed in splitting, is gone; delete its entry"
done
if ((${#sized[@]})); then
  while IFS=$'\t' read -r f n; do
    if [[ -n ${splitting[$f]:-} ]]; then
      ((n > splitting[$f])) &&
        fail "$f: $n lines, more than the ${splitting[$f]} it had when its split began; split it along its concerns"
      ((n <= max_lines)) &&
        fail "scripts/check-structure.sh: $f is $n lines now, within $max_lines: delete its entry in splitting"
    elif ((n > max_lines)); then
      fail "$f: $n lines, more than $max_lines; split it along its concerns"
    fi
  done < <(printf '%s\0' "${sized[@]}" | xargs -0 awk '
    FNR == 1 && NR > 1 { print prev "\t" n; n = 0 }
    { n = FNR; prev = FILENAME }
    END { if (prev != "") print prev "\t" n }')
fi

# (f)
bash scripts/check-seed-tables.sh "$root" >/dev/null ||
  fail "docs/seeds.md names a test or a call that does not exist (check-seed-tables above)"

if ((failed)); then
  echo "check-structure: FAILED (rules: scripts/check-structure.sh's header)" >&2
  exit 1
fi
echo "check-structure: ok (${#files[@]} files; ${#sized[@]} sources at most $max_lines lines, ${#splitting[@]} being split)"
