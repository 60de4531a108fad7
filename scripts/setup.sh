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
# rsvg-convert with zlib for the topo picture's rendered check (ctest topo_render).
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config git \
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
  libnuma-dev libamdhip64-dev clang libclang-rt-14-dev clang-19 libclang-rt-19-dev \
  libopenmpi-dev openmpi-bin python3-numpy python3-pytest librsvg2-bin zlib1g-dev >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
./build/default/tools/memarea info
# The Python package (python/memarea: pure Python over the C API, nothing to build): importable
# by Debian's python3 from this checkout, as `pip install -e` would make it (no network needed);
# it finds libmemarea.so in build/default. `cmake --install` installs a copy instead.
py_site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
$SUDO mkdir -p "$py_site"
echo "$PWD/python" | $SUDO tee "$py_site/memarea-checkout.pth" >/dev/null
/usr/bin/python3 -c 'import memarea; print("python3: import memarea: backend", memarea.backend())'
