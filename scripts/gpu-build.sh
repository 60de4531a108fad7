#!/usr/bin/env bash
# Builds the binaries the GPU suite runs (on this Debian machine, against the CUDA headers) into
# out/gpu-bin, with the commit they were built from. Then: device run with carry ["out/gpu-bin"]
# and the command `bash scripts/gpu-suite.sh out/gpu-bin $OUT`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMAREA_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/gpu -j "$(nproc)"
rm -rf out/gpu-bin && mkdir -p out/gpu-bin
cp build/gpu/tools/memarea build/gpu/tests/memarea_unit_tests build/gpu/tests/memarea_api_tests \
   out/gpu-bin/
[ -f build/gpu/tests/memarea_test_helper ] && cp build/gpu/tests/memarea_test_helper out/gpu-bin/
# The examples link the shared library: it travels with them (the suite sets LD_LIBRARY_PATH).
cp build/gpu/examples/example_* out/gpu-bin/
# The AML drop-in's tests (C programs linked with libmemarea-aml).
cp build/gpu/tests/aml/aml_test_* out/gpu-bin/
cp -P build/gpu/src/libmemarea.so* build/gpu/src/libmemarea-aml.so* out/gpu-bin/
strip out/gpu-bin/*
echo "$PWD/build/gpu/tests/memarea_test_helper" > out/gpu-bin/HELPER_PATH
echo "$(git rev-parse HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted changes')" > out/gpu-bin/COMMIT
du -sh out/gpu-bin
