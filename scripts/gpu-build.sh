#!/usr/bin/env bash
# Builds the binaries the GPU suite runs (on this Debian machine, against the CUDA headers) into
# out/gpu-bin, with the commit they were built from. Then: device run with carry ["out/gpu-bin"]
# and the command `bash scripts/gpu-suite.sh --kind KIND out/gpu-bin $OUT`, KIND being the kind
# the call asks for (e.g. nvidia-h200-x2); its suite.log and bench.json come back under KIND/ and
# replace bench/results/KIND/'s (scripts/gpu-suite.sh's header).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMAREA_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/gpu -j "$(nproc)"
rm -rf out/gpu-bin && mkdir -p out/gpu-bin
cp build/gpu/tools/memarea build/gpu/bench/memarea-bench build/gpu/tests/memarea_unit_tests \
   build/gpu/tests/memarea_api_tests build/gpu/tests/memarea_whitebox_tests out/gpu-bin/
[ -f build/gpu/tests/memarea_test_helper ] && cp build/gpu/tests/memarea_test_helper out/gpu-bin/
# The examples and the contract suite link the shared library: it travels with them (the suite
# sets LD_LIBRARY_PATH).
cp build/gpu/examples/example_* out/gpu-bin/
# The AML drop-in's tests (C programs linked with libmemarea-aml).
cp build/gpu/tests/aml/aml_test_* out/gpu-bin/
cp -P build/gpu/src/libmemarea.so* build/gpu/src/libmemarea-aml.so* out/gpu-bin/
# The MPI component (built where MPI is found; the GPU machine's Open MPI 4.1 has the same
# libmpi.so.40): its tests, example, bench and library (the example in example_* above).
if [ -f build/gpu/src/mpi/libmemarea_mpi.so ]; then
  cp -P build/gpu/src/mpi/libmemarea_mpi.so* out/gpu-bin/
  cp build/gpu/tests/mpi/memarea_mpi_tests build/gpu/tests/mpi/memarea_mpi_protocol_tests \
     build/gpu/tests/mpi/memarea_mpi_c_test build/gpu/bench/memarea-bench-mpi out/gpu-bin/
fi
# The idle-access probe (bench/experiments/idle_access_probe.cpp): the floor under IPC's re-open
# after a pause, on the GPU machine's host.
g++ -O2 -std=c++20 -o out/gpu-bin/idle_access_probe bench/experiments/idle_access_probe.cpp
# What the driver's open of another process's allocation costs by size and by how it was shared
# (bench/experiments/vmm_import_cost.cpp): the bound under the pool's IPC row.
g++ -O2 -std=c++20 -isystem /usr/local/cuda/include -o out/gpu-bin/vmm_import_cost \
    bench/experiments/vmm_import_cost.cpp -ldl
# Whether calls on a named stream need its context current, and what asking costs
# (bench/experiments/stream_context_calls.cpp; needs 2 GPUs).
g++ -O2 -std=c++20 -isystem /usr/local/cuda/include -o out/gpu-bin/stream_context_calls \
    bench/experiments/stream_context_calls.cpp -ldl
# Which calls take the default streams' handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) in their
# own context (bench/experiments/per_thread_stream_calls.cpp).
g++ -O2 -std=c++20 -isystem /usr/local/cuda/include -o out/gpu-bin/per_thread_stream_calls \
    bench/experiments/per_thread_stream_calls.cpp -ldl
# Where memset_async's fixed cost over the driver's call goes
# (bench/experiments/memset_fixed_cost.cpp: the public call, the driver layer, the lookup).
g++ -O2 -std=c++20 -DFMT_HEADER_ONLY=1 -DMEMAREA_HAVE_CUDA -Iinclude -Isrc -isystem /usr/local/cuda/include \
    -o out/gpu-bin/memset_fixed_cost bench/experiments/memset_fixed_cost.cpp build/gpu/src/libmemarea.a \
    -lnuma -ldl -lpthread -lrt
strip out/gpu-bin/*
# HIP's NVIDIA platform as libamdhip64.so.5 (tools/hip-nvidia-shim), alone in its directory: the
# suite's HIP pass puts that directory first on LD_LIBRARY_PATH. Copied after the strip above,
# which takes files only.
if [ ! -f build/gpu/hip-nvidia/libamdhip64.so.5 ]; then
  echo "gpu-build: no build/gpu/hip-nvidia/libamdhip64.so.5: the HIP NVIDIA shim needs the HIP" \
       "headers and the CUDA toolkit (see cmake's 'HIP NVIDIA shim' message)" >&2
  exit 1
fi
mkdir -p out/gpu-bin/hip-nvidia
cp build/gpu/hip-nvidia/libamdhip64.so.5 out/gpu-bin/hip-nvidia/
strip out/gpu-bin/hip-nvidia/libamdhip64.so.5
# Libraries memarea loads at run time that the GPU image may lack: libunwind (tracking's stack
# walker; without it tracking falls back to glibc's backtrace()). gpu-suite.sh puts runtime/
# on LD_LIBRARY_PATH. After the strip above, which takes files only.
mkdir -p out/gpu-bin/runtime
cp -L /usr/lib/x86_64-linux-gnu/libunwind.so.8 out/gpu-bin/runtime/ 2>/dev/null || true
# memarea-bench's entry clock (bench/cuda-entry-clock): a libcuda.so.1 alone in its directory,
# which the suite puts first on LD_LIBRARY_PATH for the copy rows "to the driver call".
mkdir -p out/gpu-bin/cuda-entry-clock
cp build/gpu/cuda-entry-clock/libcuda.so.1 out/gpu-bin/cuda-entry-clock/
strip out/gpu-bin/cuda-entry-clock/libcuda.so.1
# The Python package with its tests (the frameworks' stand-ins in tests/stand_ins too), benches
# (bench_python.py, bench_frameworks.py) and example, copied after the strip above, which
# takes files only; and its compiled extension (abi3: the GPU image's Python 3.12 loads the one
# built here), in the package, where memarea/_ext.py looks first.
mkdir -p out/gpu-bin/python/examples
cp -r python/memarea python/tests python/bench out/gpu-bin/python/
if [ ! -f build/gpu/python/memarea/_native.abi3.so ]; then
  echo "gpu-build: no build/gpu/python/memarea/_native.abi3.so: the Python extension needs" \
       "python3-dev (see cmake's 'Python extension' message)" >&2
  exit 1
fi
cp build/gpu/python/memarea/_native.abi3.so out/gpu-bin/python/memarea/
cp examples/python/*.py out/gpu-bin/python/examples/
find out/gpu-bin/python -name __pycache__ -prune -exec rm -rf {} +
echo "$PWD/build/gpu/tests/memarea_test_helper" > out/gpu-bin/HELPER_PATH
echo "$(git rev-parse HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted changes')" > out/gpu-bin/COMMIT
du -sh out/gpu-bin
