#!/usr/bin/env bash
# Installs what memarea needs on Debian 12 (apt-get), builds it and runs `memarea info`.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Build tools, test/bench libraries, header-only libraries, libnuma, and Debian's HIP headers
# (the HIP backend compiles against them; libamdhip64 itself is only loaded at run time).
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config git \
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
  libnuma-dev libamdhip64-dev clang libclang-rt-14-dev clang-19 libclang-rt-19-dev >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
./build/default/tools/memarea info
