#!/usr/bin/env bash
# Installs build/default into a scratch prefix and builds programs against it the ways users do:
# find_package (shared and static targets) and pkg-config; and the AML drop-in's tests
# (tests/aml) as AML programs, through find_package's memarea::aml / memarea::aml_static and
# through `pkg-config memarea-aml`, then runs them on two sim devices. Run after
# scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install build/default --prefix "$work/prefix" >/dev/null
# A real AML in the same prefix keeps its aml.h: memarea's lies under include/memarea-aml.
test ! -e "$work/prefix/include/aml.h"
test -f "$work/prefix/include/memarea-aml/aml.h"
cmake -S tests/install -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
MEMAREA_SIM_DEVICES=2 "$work/build/c_cpp"
MEMAREA_SIM_DEVICES=2 "$work/build/c_static"
PKG_CONFIG_PATH="$(dirname "$(find "$work/prefix" -name memarea.pc | head -n 1)")"
export PKG_CONFIG_PATH
libdir="$(pkg-config --variable=libdir memarea)"
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
cc tests/install/c.c $(pkg-config --cflags --libs memarea) -Wl,-rpath,"$libdir" \
  -o "$work/c_pkgconfig"
MEMAREA_SIM_DEVICES=3 "$work/c_pkgconfig"
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror tests/install/aml_quoted.c $(pkg-config --cflags --libs memarea-aml) \
  -Wl,-rpath,"$libdir" -o "$work/aml_quoted"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2 "$work/aml_quoted"
for src in tests/aml/test_*.c; do
  name=$(basename "$src" .c)
  # shellcheck disable=SC2046
  cc -Wall -Wextra -Werror "$src" $(pkg-config --cflags --libs memarea-aml) -lpthread \
    -Wl,-rpath,"$libdir" -o "$work/pc_$name"
  for exe in "$work/pc_$name" "$work/build/aml_$name" "$work/build/aml_static_$name"; do
    MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2 "$exe" >/dev/null
  done
done
# The installed Python package finds the installed library from where it lies (no
# MEMAREA_LIBRARY), and allocates, copies and reads back through it.
pydir=$(dirname "$(find "$work/prefix" -path '*/memarea/_install.py' | head -n 1)")
(cd "$work" && env -u MEMAREA_LIBRARY MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 \
  PYTHONPATH="$(dirname "$pydir")" /usr/bin/python3 -c '
import memarea, os, sys
assert memarea.library_path.startswith(sys.argv[1]), memarea.library_path
b = memarea.Area(0).alloc(4096)
data = os.urandom(4096)
memarea.copy(b, data)
assert b.tobytes() == data' "$work/prefix")
echo "install check: find_package (shared, static), pkg-config, AML programs through" \
     "memarea-aml (pkg-config) and memarea::aml / memarea::aml_static, and the Python package work"
