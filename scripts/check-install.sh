#!/usr/bin/env bash
# Installs build/default (or the build directory given as the first argument) into a scratch
# prefix and builds programs against it the ways users do: find_package (shared and static
# targets) and pkg-config; C-only programs (project(x C), plain cc) linking the static
# libraries through memarea::memarea_static, memarea::aml_static and `pkg-config --static`;
# and the AML drop-in's tests (tests/aml) as AML programs, through
# find_package's memarea::aml / memarea::aml_static and through `pkg-config memarea-aml`, then
# runs them on two sim devices. The programs: bin/memarea (info, topo, ipc gc; `memarea bench`
# refused, naming memarea-bench) and bin/memarea-bench beside it (its cases listed, one run on
# a sim device), memarea-bench-mpi where MPI was built, and none of the bench's developer tools
# or its stand-in libcuda. Where memarea was built with MPI, the MPI component too: C and
# C++ programs (tests/install/mpi_*) through `pkg-config memarea-mpi` and through
# find_package(memarea COMPONENTS mpi), each run under mpirun with 2 ranks; and, on a copy of
# the prefix without it (or the prefix itself where MPI was not built), that
# find_package(memarea COMPONENTS mpi) fails saying why. Run after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# A real AML in the same prefix keeps its aml.h: memarea's lies under include/memarea-aml.
test ! -e "$work/prefix/include/aml.h"
test -f "$work/prefix/include/memarea-aml/aml.h"
# The installed programs. `memarea bench` exits 2, as an unknown command does, naming
# memarea-bench, which lists the cases and measures one on a sim device.
bin=$work/prefix/bin
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$bin/memarea" info >/dev/null
rc=0
"$bin/memarea" bench --filter area 2>"$work/bench-refused.txt" || rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "memarea-bench" "$work/bench-refused.txt"; then
  echo "memarea bench: exit status $rc (2 expected), saying:" >&2
  cat "$work/bench-refused.txt" >&2
  exit 1
fi
cases=$(MEMAREA_BACKEND=none "$bin/memarea-bench" --list)
grep -qx area <<<"$cases"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$bin/memarea-bench" --quick --reps 1 --filter area \
  >/dev/null 2>&1
# memarea-bench-mpi installs with the MPI component.
if [ -n "$(find "$work/prefix" -name memarea-mpi-targets.cmake)" ]; then
  test -x "$bin/memarea-bench-mpi"
fi
for f in "$bin"/*; do
  case $(basename "$f") in
    memarea | memarea-bench | memarea-bench-mpi) ;;
    *) echo "installed a program that is not memarea's: $f" >&2; exit 1 ;;
  esac
done
if [ -n "$(find "$work/prefix" -name 'libcuda.so*')" ]; then
  echo "installed the bench's stand-in libcuda (bench/cuda-entry-clock)" >&2
  exit 1
fi
cmake -S tests/install -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
MEMAREA_SIM_DEVICES=2 "$work/build/c_cpp"
MEMAREA_SIM_DEVICES=2 "$work/build/c_static"
# A C-only project (project(x C): CMake links with the C compiler driver, which adds no C++
# runtime) linking the static libraries through memarea::memarea_static and memarea::aml_static.
cmake -S tests/install/c_only -B "$work/build-c-only" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build-c-only" >/dev/null
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$work/build-c-only/c_only_static"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$work/build-c-only/c_only_aml_static"
PKG_CONFIG_PATH="$(dirname "$(find "$work/prefix" -name memarea.pc | head -n 1)")"
export PKG_CONFIG_PATH
libdir="$(pkg-config --variable=libdir memarea)"
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
cc tests/install/c.c $(pkg-config --cflags --libs memarea) -Wl,-rpath,"$libdir" \
  -o "$work/c_pkgconfig"
MEMAREA_SIM_DEVICES=3 "$work/c_pkgconfig"
# The same C programs linked by cc with the static libraries through `pkg-config --static`:
# -l:libNAME.a picks each archive over the shared library beside it, and the rest of the line
# must be all that the archives need.
static_libs() {
  # shellcheck disable=SC2046
  echo $(pkg-config --static --libs "$1") | sed -E 's/-l(memarea(-aml)?)( |$)/-l:lib\1.a\3/g'
}
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror tests/install/c_static.c $(pkg-config --cflags memarea) \
  $(static_libs memarea) -o "$work/c_pkgconfig_static"
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror tests/install/aml_c_static.c $(pkg-config --cflags memarea-aml) \
  $(static_libs memarea-aml) -o "$work/aml_pkgconfig_static"
for exe in "$work/c_pkgconfig_static" "$work/aml_pkgconfig_static" \
    "$work/build-c-only/c_only_static" "$work/build-c-only/c_only_aml_static"; do
  if ldd "$exe" | grep -q libmemarea; then
    echo "$(basename "$exe") loads a shared libmemarea: it was to link the static libraries" >&2
    exit 1
  fi
done
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$work/c_pkgconfig_static"
MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$work/aml_pkgconfig_static"
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

# The MPI component.
cmakedir=$(dirname "$(find "$work/prefix" -name memarea-config.cmake | head -n 1)")
# find_package(memarea COMPONENTS mpi) where libmemarea_mpi is not installed: configuring must
# fail with the package's reason, not a bare "component not found".
refuses_mpi() {
  if cmake -S tests/install/mpi -B "$work/build-nompi" -G Ninja -DCMAKE_PREFIX_PATH="$1" \
      >"$work/nompi.log" 2>&1; then
    echo "find_package(memarea COMPONENTS mpi) succeeded on an install without MPI" >&2
    exit 1
  fi
  if ! grep -q "built without MPI" "$work/nompi.log"; then
    echo "find_package(memarea COMPONENTS mpi) failed without saying why:" >&2
    cat "$work/nompi.log" >&2
    exit 1
  fi
}
if [ -f "$cmakedir/memarea-mpi-targets.cmake" ]; then
  test -f "$work/prefix/include/memarea/mpi.h" -a -f "$work/prefix/include/memarea/mpi.hpp"
  mpirun=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
  mpirun=${mpirun:-mpirun}
  flags=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  if "$mpirun" --version 2>&1 | grep -qiE "open ?mpi|openrte|open-mpi"; then
    # As tests/mpi/run_mpi_test.sh: shared memory only, no CMA (refused in many containers).
    flags+=(--mca btl "self,vader" --mca btl_vader_single_copy_mechanism none)
  fi
  cmake -S tests/install/mpi -B "$work/build-mpi" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
    >/dev/null
  cmake --build "$work/build-mpi" >/dev/null
  # shellcheck disable=SC2046
  cc -Wall -Wextra -Werror tests/install/mpi_c.c $(pkg-config --cflags --libs memarea-mpi) \
    -Wl,-rpath,"$libdir" -o "$work/mpi_c_pkgconfig"
  # shellcheck disable=SC2046
  c++ -std=c++20 -Wall -Wextra -Werror tests/install/mpi_cpp.cpp \
    $(pkg-config --cflags --libs memarea-mpi) -Wl,-rpath,"$libdir" -o "$work/mpi_cpp_pkgconfig"
  for exe in "$work/build-mpi/mpi_c" "$work/build-mpi/mpi_cpp" "$work/mpi_c_pkgconfig" \
      "$work/mpi_cpp_pkgconfig"; do
    echo "\$ mpirun ${flags[*]} -n 2 $(basename "$exe")"
    MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2 timeout 120 \
      "$mpirun" "${flags[@]}" -n 2 "$exe"
  done
  # The same prefix as an install without MPI looks: no memarea-mpi targets, no .pc file.
  cp -a "$work/prefix" "$work/nompi"
  rm -f "$work/nompi/${cmakedir#"$work/prefix/"}"/memarea-mpi-targets*.cmake
  find "$work/nompi" -name memarea-mpi.pc -delete
  refuses_mpi "$work/nompi"
  if PKG_CONFIG_PATH="$(dirname "$(find "$work/nompi" -name memarea.pc | head -n 1)")" \
      pkg-config --exists memarea-mpi; then
    echo "pkg-config finds memarea-mpi in an install without MPI" >&2
    exit 1
  fi
  mpi_text="the MPI component through pkg-config (memarea-mpi) and find_package(memarea"
  mpi_text+=" COMPONENTS mpi) from C and C++ under mpirun -n 2, and its clear refusal without MPI"
else
  refuses_mpi "$work/prefix"
  if pkg-config --exists memarea-mpi; then
    echo "pkg-config finds memarea-mpi, but memarea was built without MPI" >&2
    exit 1
  fi
  mpi_text="find_package(memarea COMPONENTS mpi)'s clear refusal (memarea was built without MPI)"
fi

echo "install check: bin/memarea and bin/memarea-bench, find_package (shared, static)," \
     "pkg-config, C-only static links" \
     "(memarea::memarea_static, memarea::aml_static, pkg-config --static), AML programs through" \
     "memarea-aml (pkg-config) and memarea::aml / memarea::aml_static, the Python package," \
     "and $mpi_text work"
