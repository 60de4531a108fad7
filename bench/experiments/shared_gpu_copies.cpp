// Experiment (not part of the library; issue 16): why a halo step through the MPI window takes
// about 290 us on one H200 shared by two processes, when each process's copies alone take
// about 15 us. Two processes (fork, no MPI), each with its own primary context on device 0,
// step in lockstep (a spin barrier in shared memory) and time, per step, the slowest side:
//   d2d        cuMemcpyAsync device->device 2 x 64 KiB on a stream, then cuStreamSynchronize
//   d2d-ce     the same through cuMemcpyBatchAsync with CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE
//              (a hint to use a copy engine, not the SMs)
//   d2h        cuMemcpyAsync device->pinned host 2 x 64 KiB, then synchronize
//   d2d-alone  d2d in process 0 only (process 1 waits at the barrier)
//   h2d        cuMemcpyHtoDAsync pinned host->device 2 x bytes, then synchronize
//   staged     device->pinned host->device on the stream (what a window copy staged through the
//              host would do), then synchronize
// Each case runs `reps` steps after 20 untimed ones; prints min-median-max in us and checks the
// copied bytes once per case. libcuda is loaded with dlopen (the CUDA headers only at build):
//   g++ -std=c++20 -O2 -isystem /usr/local/cuda/include bench/experiments/shared_gpu_copies.cpp
//       -ldl -o /tmp/sgc && /tmp/sgc [reps=200] [bytes=65536]
#include "libcuda_dl.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemAllocHost)(void**, size_t);
  CUresult (*StreamCreate)(CUstream*, unsigned);
  CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemcpyBatchAsync)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                               size_t*, size_t, CUstream);
};

using libcuda_dl::load;
using libcuda_dl::ok;

/// Lockstep of the two processes: each arrives at generation g and waits for the other.
struct shared_state {
  std::atomic<int> arrived[2];
  double times[2][4096];
};

void barrier(shared_state* s, int me, int& gen) {
  ++gen;
  s->arrived[me].store(gen, std::memory_order_release);
  while (s->arrived[1 - me].load(std::memory_order_acquire) < gen) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 65536;
  if (reps < 1 || reps > 4000) return 64;
  auto* s = static_cast<shared_state*>(mmap(nullptr, sizeof(shared_state), PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (s == MAP_FAILED) return 4;
  std::memset(static_cast<void*>(s), 0, sizeof *s);
  const pid_t child = fork();
  const int me = child == 0 ? 1 : 0;

  void* lib = libcuda_dl::open();
  api cu{};
  load(lib, cu.Init, "cuInit");
  load(lib, cu.DeviceGet, "cuDeviceGet");
  load(lib, cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(lib, cu.CtxSetCurrent, "cuCtxSetCurrent");
  load(lib, cu.MemAlloc, "cuMemAlloc_v2");
  load(lib, cu.MemAllocHost, "cuMemAllocHost_v2");
  load(lib, cu.StreamCreate, "cuStreamCreate");
  load(lib, cu.MemcpyAsync, "cuMemcpyAsync");
  load(lib, cu.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  load(lib, cu.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  load(lib, cu.MemcpyHtoD, "cuMemcpyHtoD_v2");
  load(lib, cu.MemcpyDtoH, "cuMemcpyDtoH_v2");
  load(lib, cu.StreamSynchronize, "cuStreamSynchronize");
  cu.MemcpyBatchAsync = reinterpret_cast<decltype(cu.MemcpyBatchAsync)>(
      dlsym(lib, "cuMemcpyBatchAsync_v2"));
  ok(cu.Init(0), "cuInit");
  CUdevice dev;
  ok(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  ok(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  ok(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUdeviceptr src, dst;
  ok(cu.MemAlloc(&src, 2 * bytes), "cuMemAlloc");
  ok(cu.MemAlloc(&dst, 2 * bytes), "cuMemAlloc");
  void* host = nullptr;
  ok(cu.MemAllocHost(&host, 2 * bytes), "cuMemAllocHost");
  CUstream st;
  ok(cu.StreamCreate(&st, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  std::vector<unsigned char> data(2 * bytes), back(2 * bytes);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>((i * 131 + 17 * (me + 1)) >> 3);
  ok(cu.MemcpyHtoD(src, data.data(), data.size()), "cuMemcpyHtoD");

  CUmemcpyAttributes attr{};
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attr.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE;
  auto d2d = [&] {
    ok(cu.MemcpyAsync(dst, src, bytes, st), "cuMemcpyAsync");
    ok(cu.MemcpyAsync(dst + bytes, src + bytes, bytes, st), "cuMemcpyAsync");
    ok(cu.StreamSynchronize(st), "cuStreamSynchronize");
  };
  auto d2d_ce = [&] {
    CUdeviceptr ds[2] = {dst, dst + bytes}, ss[2] = {src, src + bytes};
    size_t sz[2] = {bytes, bytes}, idx[1] = {0};
    ok(cu.MemcpyBatchAsync(ds, ss, sz, 2, &attr, idx, 1, st), "cuMemcpyBatchAsync");
    ok(cu.StreamSynchronize(st), "cuStreamSynchronize");
  };
  auto d2h = [&] {
    ok(cu.MemcpyDtoHAsync(host, src, 2 * bytes, st), "cuMemcpyDtoHAsync");
    ok(cu.StreamSynchronize(st), "cuStreamSynchronize");
  };
  auto h2d = [&] {
    ok(cu.MemcpyHtoDAsync(dst, host, 2 * bytes, st), "cuMemcpyHtoDAsync");
    ok(cu.StreamSynchronize(st), "cuStreamSynchronize");
  };
  auto staged = [&] {
    ok(cu.MemcpyDtoHAsync(host, src, 2 * bytes, st), "cuMemcpyDtoHAsync");
    ok(cu.MemcpyHtoDAsync(dst, host, 2 * bytes, st), "cuMemcpyHtoDAsync");
    ok(cu.StreamSynchronize(st), "cuStreamSynchronize");
  };
  std::function<void()> f_d2d = d2d, f_ce = d2d_ce, f_d2h = d2h, f_h2d = h2d, f_staged = staged;
  std::vector<std::pair<std::string, std::pair<bool, std::function<void()>*>>> cases = {
      {"d2d", {true, &f_d2d}},
      {"d2d-ce", {true, &f_ce}},
      {"d2h", {true, &f_d2h}},
      {"d2d-alone", {false, &f_d2d}},
      {"d2d-ce-alone", {false, &f_ce}},
      {"h2d", {true, &f_h2d}},
      {"staged", {true, &f_staged}},
      {"staged-alone", {false, &f_staged}},
  };
  int gen = 0;
  for (auto& [name, c] : cases) {
    const bool both = c.first;
    std::function<void()>& f = *c.second;
    if (name.find("-ce") != std::string::npos && !cu.MemcpyBatchAsync) {
      if (me == 0) std::printf("%-14s not run: no cuMemcpyBatchAsync_v2\n", name.c_str());
      continue;
    }
    for (int i = 0; i < 20 + reps; ++i) {
      barrier(s, me, gen);
      auto a = std::chrono::steady_clock::now();
      if (both || me == 0) f();
      const double t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
      if (i >= 20) s->times[me][i - 20] = t;
    }
    barrier(s, me, gen);
    // The bytes: dst (or host) must hold src's data.
    if (both || me == 0) {
      if (name == "d2h") std::memcpy(back.data(), host, back.size());
      else ok(cu.MemcpyDtoH(back.data(), dst, back.size()), "cuMemcpyDtoH");
      if (back != data) std::printf("%-14s process %d: WRONG BYTES\n", name.c_str(), me);
      std::memset(back.data(), 0, back.size());
    }
    barrier(s, me, gen);
    if (me == 0) {
      std::vector<double> slow(static_cast<std::size_t>(reps));
      for (int i = 0; i < reps; ++i)
        slow[static_cast<std::size_t>(i)] = both ? std::max(s->times[0][i], s->times[1][i]) : s->times[0][i];
      std::sort(slow.begin(), slow.end());
      std::printf("%-14s %zu B x2: %8.1f - %8.1f - %8.1f us (min-median-max, %d steps, %s)\n",
                  name.c_str(), bytes, slow.front(), slow[slow.size() / 2], slow.back(), reps,
                  both ? "both processes, the slower" : "process 0 alone");
      std::fflush(stdout);
    }
    barrier(s, me, gen);
  }
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
