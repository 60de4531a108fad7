#!/usr/bin/env bash
# scripts/check-structure.sh against includes that break its rules: each case adds one line to a
# copy of the checkout and expects the check to fail naming that file and the rule, however the
# include is spelled (by the layer's root, relative to the including file, with a comment that
# names an allowed file after it); the unchanged copy passes, and so do the includes the rules
# allow. Usage: check_structure_test.sh SOURCE_DIR (a git checkout; skipped, exit 77, when it is
# not one).
set -euo pipefail

src=${1:?usage: check_structure_test.sh SOURCE_DIR}
if ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIPPED: $src is not a git checkout"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The checkout as the script sees it (tracked and not ignored files), in a repository of its own.
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -f $f ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$work"
git -C "$work" init -q
git -C "$work" add -A

failures=0
check() {  # expect (pass|fail) what [pattern]
  local expect=$1 what=$2 pattern=${3:-} out rc=0
  out=$(bash "$work/scripts/check-structure.sh" "$work" 2>&1) || rc=$?
  if [[ $expect == pass && $rc -ne 0 ]]; then
    echo "FAIL: $what: the check failed:"$'\n'"$out"
    failures=$((failures + 1))
  elif [[ $expect == fail && $rc -eq 0 ]]; then
    echo "FAIL: $what: the check passed:"$'\n'"$out"
    failures=$((failures + 1))
  elif [[ $expect == fail ]] && ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: the check failed without naming '$pattern':"$'\n'"$out"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
# Adds `line` to the end of file in the copy, runs check with the rest, puts the file back.
with_line() {  # file line expect what [pattern]
  local file=$1 line=$2
  shift 2
  cp "$work/$file" "$work/$file.orig"
  printf '%s\n' "$line" >>"$work/$file"
  check "$@"
  mv "$work/$file.orig" "$work/$file"
}

check pass "the checkout as it is"

# (a) the driver includes core.
with_line src/driver/front.cpp '#include "core/system.hpp"' fail \
  "(a) driver includes core by the layer's root" "src/driver/front.cpp"
with_line src/driver/front.cpp '#include "../core/system.hpp"' fail \
  "(a) driver includes core by a relative path" "the driver layer includes core"
# (b) the CLI and memarea-bench include internals.
with_line tools/main.cpp '#include "../src/core/system.hpp"' fail \
  "(b) the CLI includes core by a relative path" "the CLI includes memarea's internals"
with_line bench/src/main.cpp '#include "../../src/capi/c_call.hpp"' fail \
  "(b) memarea-bench includes the C API's internals by a relative path" \
  "memarea-bench includes memarea's internals"
with_line bench/src/main.cpp '#include "driver/driver.hpp"' pass \
  "(b) memarea-bench includes the driver layer (a raw baseline may)"

# (d) core's rooms.
with_line src/core/pool/pool.cpp '#include "core/ipc/ipc_impl.hpp"' fail \
  "(d) pool includes ipc by core's root" "room pool includes ipc"
with_line src/core/pool/pool.cpp '#include "../ipc/ipc_impl.hpp"' fail \
  "(d) pool includes ipc by a relative path" "room pool includes ipc"
with_line src/core/memory/area.cpp '#include "../copy/copy_impl.hpp"' fail \
  "(d) memory includes copy by a relative path" "room memory includes room copy"
with_line src/core/system.cpp '#include "ipc/ipc_impl.hpp"' fail \
  "(d) core's root includes a room by a path relative to it" "core's root includes room ipc"
with_line src/core/system.cpp '#include "../core/./memory/../pool/pool_impl.hpp"' fail \
  "(d) core's root includes a room by a winding relative path" "core's root includes room pool"
with_line src/core/ipc/ipc_fd.cpp '#include "../pool/pool_impl.hpp"' pass \
  "(d) ipc includes pool by a relative path (allowed)"
with_line src/core/copy/copy.cpp '#include "../stream_impl.hpp"' pass \
  "(d) a room includes core's root by a relative path (allowed)"

# (e) the topology measurement includes core.
with_line src/topo/topo.cpp '#include "core/ipc/ipc_impl.hpp"  // not "core/system.hpp"' fail \
  "(e) topo includes ipc, with an allowed name later on the line" \
  "the topology measurement includes core's internals"
with_line src/topo/topo.cpp '#include "../core/memory/registry.hpp"' fail \
  "(e) topo includes the registry by a relative path" \
  "the topology measurement includes core's internals"
with_line src/topo/topo.cpp '#include "../core/system.hpp"' pass \
  "(e) topo includes core/system.hpp by a relative path (allowed)"

# (c) a source past the limit.
long=$(mktemp -p "$work/tests" long_XXXXXX.cpp)
for _ in $(seq 701); do echo "//" >>"$long"; done
check fail "(c) a new source of 701 lines" "${long#"$work"/}: 701 lines, more than 700"
rm -f "$long"

if ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
