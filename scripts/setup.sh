#!/usr/bin/env bash
# Installs what memarea needs on Debian 12 (apt-get), builds it and runs `memarea info`.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Build tools, test/bench libraries, header-only libraries, libnuma, Debian's HIP headers
# (the HIP backend compiles against them; libamdhip64 itself is only loaded at run time), and
# rsvg-convert with zlib for the topo picture's rendered check (ctest topo_render), pip,
# venv, setuptools and wheel for the offline pip installs (scripts/check-pip-install.sh), and
# Python's headers for the package's compiled extension (python/src/_native.c).
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config git \
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
  libnuma-dev libamdhip64-dev clang libclang-rt-14-dev clang-19 libclang-rt-19-dev \
  libopenmpi-dev openmpi-bin python3-numpy python3-pytest \
  python3-pip python3-venv python3-setuptools python3-wheel python3-dev librsvg2-bin \
  zlib1g-dev libunwind8 >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
./build/default/tools/memarea info
# The Python package (python/memarea over the C API, and its compiled extension, built above
# into build/default/python/memarea) is not installed here: a machine-wide install would point
# every checkout at whichever ran this last. It runs from this checkout with PYTHONPATH (as
# ctest does), or installs with pip offline (docs/python.md; scripts/check-pip-install.sh
# checks those ways).
PYTHONPATH="$PWD/python" /usr/bin/python3 -c \
  'import memarea; print("python3: import memarea: backend", memarea.backend(), "on",
                         memarea.implementation)'
# An earlier setup.sh wrote a machine-wide .pth naming its checkout: this one's goes.
py_site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
if [ "$(cat "$py_site/memarea-checkout.pth" 2>/dev/null)" = "$PWD/python" ]; then
  $SUDO rm -f "$py_site/memarea-checkout.pth"
fi
echo "Python package: PYTHONPATH=$PWD/python, or" \
     "pip install --no-build-isolation ./python (or -e) in a venv (docs/python.md)"
