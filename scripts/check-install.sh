#!/usr/bin/env bash
# Installs build/default into a scratch prefix and builds programs against it the ways users do:
# find_package (shared and static targets) and pkg-config. Run after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install build/default --prefix "$work/prefix" >/dev/null
cmake -S tests/install -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
MEMAREA_SIM_DEVICES=2 "$work/build/c_cpp"
MEMAREA_SIM_DEVICES=2 "$work/build/c_static"
PKG_CONFIG_PATH="$(dirname "$(find "$work/prefix" -name memarea.pc | head -n 1)")"
export PKG_CONFIG_PATH
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
cc tests/install/c.c $(pkg-config --cflags --libs memarea) \
  -Wl,-rpath,"$(pkg-config --variable=libdir memarea)" -o "$work/c_pkgconfig"
MEMAREA_SIM_DEVICES=3 "$work/c_pkgconfig"
echo "install check: find_package (shared, static) and pkg-config work"
