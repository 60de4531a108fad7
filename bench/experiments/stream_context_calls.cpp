// Experiment (not part of the library; issue 18, deliverable 6): does a call on a named stream
// need the stream's context current, and what does asking for the current context cost?
// memarea's CUDA backend asked libcuda for the current context (cuCtxGetCurrent) before every
// copy and stream call, and switched to the device's primary context where another was current
// (it no longer does on named streams: docs/bench.md).
// The CUDA programming guide says a memory copy succeeds when issued to a stream that is not
// associated with the current device. This program checks that for the driver calls memarea's
// hot paths make, with three states of the calling thread: the stream's own context current,
// device 1's primary context current, and no context current. For each it prints the result of
// cuMemcpyAsync (device 0 -> pinned host, 4 KiB), cuMemcpyPeerAsync (device 0 -> device 1),
// cuEventRecord, cuStreamQuery and cuStreamSynchronize on a stream of device 0, and whether the
// bytes arrived (random bytes, compared byte for byte); then cuMemcpyAsync from device 0 to
// pageable host memory, device 0 to device 0 and pageable host memory to device 0, and
// cuMemsetD8Async, with their bytes checked. Then it times, in this thread's CPU time, per call
// (min/median/max over 31 batches of 20,000): cuCtxGetCurrent, a switch to device 0's context
// and back to device 1's (two cuCtxSetCurrent), and
// cuMemcpyAsync of 4 KiB device -> pinned on the stream, with the stream's context current and
// with device 1's current (the stream synchronised untimed between batches).
// Build (CUDA headers only; libcuda is loaded at run time) and run on a machine with 2 GPUs:
//   g++ -std=c++20 -O2 -isystem /usr/local/cuda/include bench/experiments/stream_context_calls.cpp
//       -ldl -o /tmp/scc && /tmp/scc
#include "libcuda_dl.hpp"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

struct api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetCount)(int*);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxGetCurrent)(CUcontext*);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemAllocHost)(void**, size_t);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*MemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
  CUresult (*StreamCreate)(CUstream*, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*StreamQuery)(CUstream);
  CUresult (*EventCreate)(CUevent*, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
};

using libcuda_dl::load;

api a;

using libcuda_dl::ok;

void load_api() {
  void* lib = libcuda_dl::open();
  load(lib, a.Init, "cuInit");
  load(lib, a.DeviceGet, "cuDeviceGet");
  load(lib, a.DeviceGetCount, "cuDeviceGetCount");
  load(lib, a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(lib, a.CtxSetCurrent, "cuCtxSetCurrent");
  load(lib, a.CtxGetCurrent, "cuCtxGetCurrent");
  load(lib, a.MemAlloc, "cuMemAlloc_v2");
  load(lib, a.MemAllocHost, "cuMemAllocHost_v2");
  load(lib, a.MemcpyHtoD, "cuMemcpyHtoD_v2");
  load(lib, a.MemcpyDtoH, "cuMemcpyDtoH_v2");
  load(lib, a.MemcpyAsync, "cuMemcpyAsync");
  load(lib, a.MemsetD8Async, "cuMemsetD8Async");
  load(lib, a.MemcpyPeerAsync, "cuMemcpyPeerAsync");
  load(lib, a.StreamCreate, "cuStreamCreate");
  load(lib, a.StreamSynchronize, "cuStreamSynchronize");
  load(lib, a.StreamQuery, "cuStreamQuery");
  load(lib, a.EventCreate, "cuEventCreate");
  load(lib, a.EventRecord, "cuEventRecord");
}

double thread_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

void spread(const char* name, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("%-58s %7.1f %7.1f %7.1f ns\n", name, v.front(), v[v.size() / 2], v.back());
}

constexpr std::size_t kBytes = 4096;

}  // namespace

int main() {
  load_api();
  ok(a.Init(0), "cuInit");
  int n = 0;
  ok(a.DeviceGetCount(&n), "cuDeviceGetCount");
  if (n < 2) {
    std::printf("needs 2 devices, found %d\n", n);
    return 2;
  }
  CUdevice d0, d1;
  CUcontext c0, c1;
  ok(a.DeviceGet(&d0, 0), "cuDeviceGet");
  ok(a.DeviceGet(&d1, 1), "cuDeviceGet");
  ok(a.DevicePrimaryCtxRetain(&c0, d0), "retain 0");
  ok(a.DevicePrimaryCtxRetain(&c1, d1), "retain 1");
  ok(a.CtxSetCurrent(c1), "set 1");
  CUdeviceptr on1;
  ok(a.MemAlloc(&on1, kBytes), "alloc on 1");
  ok(a.CtxSetCurrent(c0), "set 0");
  CUdeviceptr on0, on0b, on0c, on0d;
  void* host = nullptr;
  ok(a.MemAlloc(&on0, kBytes), "alloc on 0");
  ok(a.MemAlloc(&on0b, kBytes), "alloc on 0");
  ok(a.MemAlloc(&on0c, kBytes), "alloc on 0");
  ok(a.MemAlloc(&on0d, kBytes), "alloc on 0");
  ok(a.MemAllocHost(&host, kBytes), "pinned");
  CUstream s0;
  CUevent e0;
  ok(a.StreamCreate(&s0, CU_STREAM_NON_BLOCKING), "stream on 0");
  ok(a.EventCreate(&e0, CU_EVENT_DISABLE_TIMING), "event on 0");
  std::mt19937_64 rng(0x5C0);
  std::vector<unsigned char> bytes(kBytes), back(kBytes);
  struct state {
    const char* name;
    CUcontext current;
  } states[] = {{"the stream's context current", c0},
                {"device 1's context current", c1},
                {"no context current", nullptr}};
  int wrong = 0;
  std::printf("%-30s %6s %6s %6s %6s %6s  %s\n", "state", "copy", "peer", "event", "query",
              "sync", "bytes");
  for (const state& st : states) {
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    ok(a.CtxSetCurrent(c0), "set 0");
    ok(a.MemcpyHtoD(on0, bytes.data(), kBytes), "fill");
    {
      std::vector<unsigned char> z(kBytes, 0);
      for (CUdeviceptr p : {on0b, on0c, on0d}) ok(a.MemcpyHtoD(p, z.data(), kBytes), "clear");
    }
    std::memset(host, 0, kBytes);
    ok(a.CtxSetCurrent(c1), "set 1");
    std::vector<unsigned char> zero(kBytes, 0);
    ok(a.MemcpyHtoD(on1, zero.data(), kBytes), "clear 1");
    ok(a.CtxSetCurrent(st.current), "set state");
    const CUresult copy = a.MemcpyAsync(reinterpret_cast<CUdeviceptr>(host), on0, kBytes, s0);
    const CUresult peer = a.MemcpyPeerAsync(on1, c1, on0, c0, kBytes, s0);
    // Pageable host memory both ways (the driver stages it), device to device, and a memset.
    std::vector<unsigned char> pageable(kBytes, 0);
    const CUresult to_pageable =
        a.MemcpyAsync(reinterpret_cast<CUdeviceptr>(pageable.data()), on0, kBytes, s0);
    const CUresult d2d = a.MemcpyAsync(on0b, on0, kBytes, s0);
    const CUresult from_pageable =
        a.MemcpyAsync(on0c, reinterpret_cast<CUdeviceptr>(bytes.data()), kBytes, s0);
    const CUresult memset = a.MemsetD8Async(on0d, 0x5A, kBytes, s0);
    const CUresult event = a.EventRecord(e0, s0);
    CUresult query = a.StreamQuery(s0);
    const CUresult sync = a.StreamSynchronize(s0);
    if (query == CUDA_ERROR_NOT_READY) query = CUDA_SUCCESS;  // a state, not a failure
    ok(a.CtxSetCurrent(c0), "set 0");
    ok(a.StreamSynchronize(s0), "sync under 0");
    const bool host_ok = std::memcmp(host, bytes.data(), kBytes) == 0;
    ok(a.CtxSetCurrent(c1), "set 1");
    ok(a.MemcpyDtoH(back.data(), on1, kBytes), "read 1");
    const bool peer_ok = back == bytes;
    std::vector<unsigned char> b2(kBytes), b3(kBytes), b4(kBytes);
    ok(a.CtxSetCurrent(c0), "set 0");
    ok(a.MemcpyDtoH(b2.data(), on0b, kBytes), "read d2d");
    ok(a.MemcpyDtoH(b3.data(), on0c, kBytes), "read from pageable");
    ok(a.MemcpyDtoH(b4.data(), on0d, kBytes), "read memset");
    const bool more_ok = (to_pageable || pageable == bytes) && (d2d || b2 == bytes) &&
                         (from_pageable || b3 == bytes) &&
                         (memset || std::all_of(b4.begin(), b4.end(),
                                                [](unsigned char c) { return c == 0x5A; }));
    if (!more_ok) ++wrong;
    std::printf("%-30s %6d %6d %6d %6d %6d  %s %s\n", st.name, copy, peer, event, query, sync,
                copy ? "(no copy)" : host_ok ? "host ok" : "HOST WRONG",
                peer ? "(no peer)" : peer_ok ? "peer ok" : "PEER WRONG");
    if ((!copy && !host_ok) || (!peer && !peer_ok)) ++wrong;
    std::printf("%-30s pageable<-d %d, d->d %d, d<-pageable %d, memset %d: %s\n", "", to_pageable,
                d2d, from_pageable, memset, more_ok ? "bytes ok" : "BYTES WRONG");
  }
  // Costs.
  constexpr int kBatch = 20000, kReps = 31;
  std::vector<double> get, own, other, pair;
  CUcontext seen;
  for (int r = 0; r < kReps; ++r) {
    ok(a.CtxSetCurrent(c0), "set 0");
    double t0 = thread_ns();
    for (int i = 0; i < kBatch; ++i) (void)a.CtxGetCurrent(&seen);
    get.push_back((thread_ns() - t0) / kBatch);
    // What memarea's switch costs where another context is current: to device 0's and back.
    ok(a.CtxSetCurrent(c1), "set 1");
    t0 = thread_ns();
    for (int i = 0; i < kBatch; ++i) {
      (void)a.CtxSetCurrent(c0);
      (void)a.CtxSetCurrent(c1);
    }
    pair.push_back((thread_ns() - t0) / kBatch);
    for (CUcontext cur : {c0, c1}) {
      ok(a.CtxSetCurrent(cur), "set");
      t0 = thread_ns();
      for (int i = 0; i < kBatch; ++i)
        ok(a.MemcpyAsync(reinterpret_cast<CUdeviceptr>(host), on0, kBytes, s0), "timed copy");
      (cur == c0 ? own : other).push_back((thread_ns() - t0) / kBatch);
      ok(a.StreamSynchronize(s0), "sync");
    }
  }
  std::printf("\nper call, this thread's CPU time (min median max over %d batches of %d):\n",
              kReps, kBatch);
  spread("cuCtxGetCurrent", get);
  spread("cuCtxSetCurrent to device 0's context and back to 1's", pair);
  spread("cuMemcpyAsync 4 KiB d0->pinned, stream's context current", own);
  spread("cuMemcpyAsync 4 KiB d0->pinned, device 1's context current", other);
  return wrong ? 1 : 0;
}
