#!/usr/bin/env bash
# Installs the Python package (python/) with pip, offline, the ways docs/python.md gives, each
# into a fresh venv, and uses every copy from outside the checkout on one sim device: an
# allocation, a copy in and the bytes read back, a pool allocation viewed through the buffer
# protocol. Each copy must run on the compiled extension (memarea.implementation == "compiled"),
# which pip packs from the CMake build (python/setup.py) or, for the editable install, finds in
# the build tree; once more with MEMAREA_PYTHON_PURE=1, on ctypes alone.
#   - a venv with --system-site-packages: `pip install --no-build-isolation ./python` (the
#     library named by MEMAREA_LIBRARY, then found on LD_LIBRARY_PATH), and
#     `pip install --no-build-isolation -e ./python` (the package from this checkout, the
#     library found in its build tree, no variable set);
#   - a plain venv (no setuptools' wheel support inside): a wheel built by Debian's pip, installed.
# Debian's pip into a scratch --root with --break-system-packages: the system-wide command,
# without changing the machine. Run after scripts/setup.sh: build/default (or the build directory
# given as the first argument) holds the library and the extension.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build/default}" && pwd)
lib="$build/src/libmemarea.so"
test -f "$lib"
ext="$build/python/memarea/_native.abi3.so"
if [ ! -f "$ext" ]; then
  echo "check-pip-install: no $ext: the build found no Python headers (python3-dev;" \
       "scripts/setup.sh installs it)" >&2
  exit 1
fi
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Nothing from an index: what cannot be built from what is installed must fail here.
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
# python/setup.py packs the extension of this build.
export MEMAREA_BUILD_DIR="$build"
unset PIP_FIND_LINKS PYTHONPATH MEMAREA_LIBRARY MEMAREA_PYTHON_PURE
checkout=$PWD

# Imports memarea with the given Python from $work and checks where the package, the library
# and the extension came from (EXTENSION_DIR "-": none, the package runs on ctypes):
# use PYTHON PACKAGE_DIR_PREFIX LIBRARY_PATH EXTENSION_DIR [VAR=VALUE...].
use() {
  local python=$1 pkg=$2 want_lib=$3 want_ext=$4
  shift 4
  (cd "$work" && env MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 "$@" "$python" -c '
import os, sys
import memarea
pkg, want_lib, want_ext = sys.argv[1:]
here = os.path.realpath(memarea.__file__)
assert here.startswith(os.path.realpath(pkg)), f"memarea imported from {here}, not {pkg}"
got = memarea.library_path
if "/" in want_lib:  # a path: the same file, however spelled
    got, want_lib = os.path.realpath(got), os.path.realpath(want_lib)
assert got == want_lib, f"library {got}, not {want_lib}"
if want_ext == "-":
    assert memarea.implementation == "ctypes", memarea.implementation
    ext = "ctypes alone"
else:
    assert memarea.implementation == "compiled", memarea._ext.reason
    ext = os.path.realpath(sys.modules["memarea._native"].__file__)
    assert os.path.dirname(ext) == os.path.realpath(want_ext), f"extension {ext}, not in {want_ext}"
b = memarea.Area(0).alloc(4096)
data = os.urandom(4096)
memarea.copy(b, data)
assert b.tobytes() == data
b.free()
if memarea.implementation == "compiled":  # the buffer protocol, on Python 3.11 too
    with memarea.Pool(None).alloc(64) as h:
        memoryview(h)[:] = data[:64]
        assert h.tobytes() == data[:64]
print(f"  ok: {here} with {memarea.library_path}, {ext}")' "$pkg" "$want_lib" "$want_ext")
}

echo "venv --system-site-packages, pip install --no-build-isolation ./python"
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-build-isolation ./python
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
use "$work/venv/bin/python" "$site/memarea" "$lib" "$site/memarea" MEMAREA_LIBRARY="$lib"
use "$work/venv/bin/python" "$site/memarea" libmemarea.so.0 "$site/memarea" \
  LD_LIBRARY_PATH="$build/src"
use "$work/venv/bin/python" "$site/memarea" "$lib" - MEMAREA_LIBRARY="$lib" MEMAREA_PYTHON_PURE=1

# compat: a plain path in a .pth, seen before the system's site directories. setuptools' default
# import hook comes after them, so a memarea-checkout.pth that an older setup.sh left there (it
# names some checkout) would win over it (docs/python.md).
echo "the same venv, pip install --no-build-isolation -e ./python (editable_mode=compat)"
"$work/venv/bin/pip" install -q --no-build-isolation --config-settings editable_mode=compat \
  -e ./python
# The checkout's build tree, build/default first (memarea/_lib.py), and the extension beside it.
tree_lib="$checkout/build/default/src/libmemarea.so"
[ -f "$tree_lib" ] || tree_lib=$lib
tree_ext=$(dirname "$(dirname "$(realpath "$tree_lib")")")/python/memarea
use "$work/venv/bin/python" "$checkout/python/memarea" "$tree_lib" "$tree_ext"

echo "plain venv, a wheel built by Debian's pip"
"$py" -m pip wheel -q --no-deps --no-build-isolation -w "$work/wheels" ./python
"$py" -m venv "$work/plain"
# A platform wheel for CPython 3.11 and later (the extension's limited API), not a pure one.
wheel=$(ls "$work"/wheels/memarea-*.whl)
case $wheel in
  *-cp311-abi3-linux_*.whl) ;;
  *) echo "check-pip-install: $wheel is not tagged cp311-abi3 for this platform" >&2; exit 1 ;;
esac
"$work/plain/bin/pip" install -q "$wheel"
site=$("$work/plain/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
use "$work/plain/bin/python" "$site/memarea" "$lib" "$site/memarea" MEMAREA_LIBRARY="$lib"

echo "Debian's pip, system-wide command, into a scratch root"
"$py" -m pip install -q --break-system-packages --no-build-isolation --root "$work/root" ./python
pkg=$(dirname "$(find "$work/root" -path '*/memarea/__init__.py' | head -n 1)")
use "$py" "$pkg" "$lib" "$pkg" MEMAREA_LIBRARY="$lib" PYTHONPATH="$(dirname "$pkg")"

# pip builds in place: its scratch files stay out of the checkout's way (and out of git).
rm -rf python/build python/memarea.egg-info
echo "pip install check: venv (system site) install and editable install, plain venv from a" \
     "wheel, Debian's pip with --break-system-packages: all import, allocate on sim and run on" \
     "the compiled extension (and on ctypes alone when told)"
