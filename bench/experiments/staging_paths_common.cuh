// The common part of bench/experiments/staging_paths.cu (an experiment, not part of the
// library): error checks, sizes, the kernels, the rig of two GPUs and a pinned ring, and the
// first call's configurations. Included by staging_paths.cu only.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define CU(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char* s_ = nullptr;                                                \
      cuGetErrorString(r_, &s_);                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);      \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

constexpr size_t MiB = size_t{1} << 20;
constexpr size_t KiB = size_t{1} << 10;
constexpr size_t max_n = 256 * MiB;
constexpr size_t ring_bytes = 64 * MiB;
constexpr int max_flags = 1024;

// ---- kernels ---------------------------------------------------------------------------------

__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct ring_args {
  const char* src;  // producer: device source; consumer: unused
  char* dst;        // consumer: device destination
  size_t n;
  char* ring;       // pinned host ring of nslots * slot bytes
  size_t slot;
  unsigned nslots;
  unsigned* ready;  // per slot: times filled
  unsigned* freed;  // per slot: times drained
  int* err;
};

// Copies len bytes (multiple of 16) with the whole block, 4 x 16 bytes in flight per thread.
__device__ __forceinline__ void block_copy(char* d, const char* s, size_t len) {
  const uint4* s4 = reinterpret_cast<const uint4*>(s);
  uint4* d4 = reinterpret_cast<uint4*>(d);
  const size_t n4 = len / 16;
  size_t i = threadIdx.x;
  const size_t step = blockDim.x;
  for (; i + 3 * step < n4; i += 4 * step) {
    uint4 a = s4[i], b = s4[i + step], c = s4[i + 2 * step], e = s4[i + 3 * step];
    d4[i] = a;
    d4[i + step] = b;
    d4[i + 2 * step] = c;
    d4[i + 3 * step] = e;
  }
  for (; i < n4; i += step) d4[i] = s4[i];
}

__device__ bool wait_at_least(const unsigned* flag, unsigned v, int* err) {
  const unsigned long long t0 = now_ns();
  while (ld_acquire_sys(flag) < v) {
    if (now_ns() - t0 > 2000000000ull) {
      atomicExch(err, 1);
      return false;
    }
  }
  return true;
}

__global__ void produce(ring_args a) {
  const size_t chunks = (a.n + a.slot - 1) / a.slot;
  __shared__ int ok;
  for (size_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    const unsigned s = static_cast<unsigned>(k % a.nslots);
    const unsigned lap = static_cast<unsigned>(k / a.nslots);
    if (threadIdx.x == 0) ok = wait_at_least(a.freed + s, lap, a.err);
    __syncthreads();
    if (!ok) return;
    const size_t len = a.n - k * a.slot < a.slot ? a.n - k * a.slot : a.slot;
    block_copy(a.ring + s * a.slot, a.src + k * a.slot, len);
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      st_release_sys(a.ready + s, lap + 1);
    }
  }
}

__global__ void consume(ring_args a) {
  const size_t chunks = (a.n + a.slot - 1) / a.slot;
  __shared__ int ok;
  for (size_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    const unsigned s = static_cast<unsigned>(k % a.nslots);
    const unsigned lap = static_cast<unsigned>(k / a.nslots);
    if (threadIdx.x == 0) ok = wait_at_least(a.ready + s, lap + 1, a.err);
    __syncthreads();
    if (!ok) return;
    const size_t len = a.n - k * a.slot < a.slot ? a.n - k * a.slot : a.slot;
    block_copy(a.dst + k * a.slot, a.ring + s * a.slot, len);
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      st_release_sys(a.freed + s, lap + 1);
    }
  }
}

// Plain copy with the SMs (no flags): bandwidth of SM writes to / reads from host memory.
__global__ void sm_copy(char* d, const char* s, size_t n) {
  const size_t per = (n / gridDim.x) & ~size_t{15};
  const size_t off = per * blockIdx.x;
  const size_t len = blockIdx.x + 1 == gridDim.x ? n - off : per;
  block_copy(d + off, s + off, len);
}

// ---- host side -------------------------------------------------------------------------------

struct rig {
  char* src = nullptr;    // GPU 0
  char* dst = nullptr;    // GPU 1
  char* ring = nullptr;   // pinned, mapped, portable
  char* ring2 = nullptr;  // a second ring (independent-traffic experiments)
  unsigned* flags = nullptr;  // pinned: ready[max_flags], freed[max_flags]
  int* err = nullptr;
  cudaStream_t s0 = nullptr, s1 = nullptr;
  std::vector<cudaEvent_t> staged, drained;  // on GPU 0 / GPU 1
  std::vector<char> expect, got;
  int sms = 0;
  unsigned* ready() { return flags; }
  unsigned* freed() { return flags + max_flags; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void sync_both(rig& r) {
  CK(cudaSetDevice(0));
  CK(cudaStreamSynchronize(r.s0));
  CK(cudaSetDevice(1));
  CK(cudaStreamSynchronize(r.s1));
}

// Times fn (which queues work) over reps; checks dst after the first when check is set.
void measure(rig& r, const char* name, size_t n, bool check, const std::function<void()>& fn,
             double base_gbs = 0) {
  if (check) {
    CK(cudaSetDevice(1));
    CK(cudaMemset(r.dst, 0, n));
    CK(cudaDeviceSynchronize());
  }
  std::memset(r.flags, 0, 2 * max_flags * sizeof(unsigned));
  *r.err = 0;
  std::vector<double> t;
  bool bad = false;
  for (int rep = 0; rep < 23; ++rep) {
    std::memset(r.flags, 0, 2 * max_flags * sizeof(unsigned));
    auto a = std::chrono::steady_clock::now();
    fn();
    sync_both(r);
    auto b = std::chrono::steady_clock::now();
    if (*r.err) {
      std::printf("%-44s n=%4zu MiB  TIMEOUT in kernel\n", name, n / MiB);
      *r.err = 0;
      return;
    }
    if (rep >= 3) t.push_back(std::chrono::duration<double>(b - a).count());
    if (rep == 0 && check) {
      CK(cudaSetDevice(1));
      CK(cudaMemcpy(r.got.data(), r.dst, n, cudaMemcpyDeviceToHost));
      bad = std::memcmp(r.got.data(), r.expect.data(), n) != 0;
    }
  }
  const double s = median(t);
  const double gbs = n / s / 1e9;
  std::printf("%-44s n=%4zu MiB  %9.1f us  %6.1f GB/s", name, n / MiB, s * 1e6, gbs);
  if (base_gbs > 0) std::printf("  %.3fx driver", gbs / base_gbs);
  if (check) std::printf("  %s", bad ? "DATA MISMATCH" : "data ok");
  std::printf("\n");
  std::fflush(stdout);
}

// memarea's current pipeline: copy engines chained by events, nb buffers of c bytes.
void ce_events(rig& r, size_t n, size_t c, size_t nb) {
  size_t i = 0;
  for (size_t off = 0; off < n; off += c, ++i) {
    const size_t len = std::min(c, n - off), b = i % nb;
    CK(cudaSetDevice(0));
    if (i >= nb) CK(cudaStreamWaitEvent(r.s0, r.drained[b], 0));
    CK(cudaMemcpyAsync(r.ring + b * c, r.src + off, len, cudaMemcpyDeviceToHost, r.s0));
    CK(cudaEventRecord(r.staged[b], r.s0));
    CK(cudaSetDevice(1));
    CK(cudaStreamWaitEvent(r.s1, r.staged[b], 0));
    CK(cudaMemcpyAsync(r.dst + off, r.ring + b * c, len, cudaMemcpyHostToDevice, r.s1));
    CK(cudaEventRecord(r.drained[b], r.s1));
  }
}

// The same chained by stream memory operations on flags in pinned host memory.
void ce_memops(rig& r, size_t n, size_t c, size_t nb, bool no_barrier) {
  size_t i = 0;
  const unsigned wflags = no_barrier ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER : 0;
  for (size_t off = 0; off < n; off += c, ++i) {
    const size_t len = std::min(c, n - off), b = i % nb;
    const unsigned lap = static_cast<unsigned>(i / nb);
    CK(cudaSetDevice(0));
    if (lap > 0)
      CU(cuStreamWaitValue32(r.s0, reinterpret_cast<CUdeviceptr>(r.freed() + b), lap,
                             CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaMemcpyAsync(r.ring + b * c, r.src + off, len, cudaMemcpyDeviceToHost, r.s0));
    CU(cuStreamWriteValue32(r.s0, reinterpret_cast<CUdeviceptr>(r.ready() + b), lap + 1, 0));
    CK(cudaSetDevice(1));
    CU(cuStreamWaitValue32(r.s1, reinterpret_cast<CUdeviceptr>(r.ready() + b), lap + 1,
                           CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaMemcpyAsync(r.dst + off, r.ring + b * c, len, cudaMemcpyHostToDevice, r.s1));
    CU(cuStreamWriteValue32(r.s1, reinterpret_cast<CUdeviceptr>(r.freed() + b), lap + 1,
                            wflags));
  }
}

ring_args args(rig& r, size_t n, size_t slot, unsigned nslots) {
  ring_args a{};
  a.src = r.src;
  a.dst = r.dst;
  a.n = n;
  a.ring = r.ring;
  a.slot = slot;
  a.nslots = nslots;
  a.ready = r.ready();
  a.freed = r.freed();
  a.err = r.err;
  return a;
}

// Both halves by the SMs: a producer grid on GPU 0, a consumer grid on GPU 1, flags per slot.
void sm_both(rig& r, size_t n, size_t slot, int blocks0, int blocks1) {
  const unsigned nslots = static_cast<unsigned>(std::min<size_t>(ring_bytes / slot, max_flags));
  auto a = args(r, n, slot, nslots);
  CK(cudaSetDevice(1));
  consume<<<blocks1, 1024, 0, r.s1>>>(a);
  CK(cudaGetLastError());
  CK(cudaSetDevice(0));
  produce<<<blocks0, 1024, 0, r.s0>>>(a);
  CK(cudaGetLastError());
}

// Copy engine device->host (flag written by a stream memory op), SMs host->device.
void ce_then_sm(rig& r, size_t n, size_t c, int blocks1) {
  const unsigned nslots = static_cast<unsigned>(std::min<size_t>(ring_bytes / c, max_flags));
  auto a = args(r, n, c, nslots);
  CK(cudaSetDevice(1));
  consume<<<blocks1, 1024, 0, r.s1>>>(a);
  CK(cudaGetLastError());
  CK(cudaSetDevice(0));
  size_t i = 0;
  for (size_t off = 0; off < n; off += c, ++i) {
    const size_t len = std::min(c, n - off), b = i % nslots;
    const unsigned lap = static_cast<unsigned>(i / nslots);
    if (lap > 0)
      CU(cuStreamWaitValue32(r.s0, reinterpret_cast<CUdeviceptr>(r.freed() + b), lap,
                             CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaMemcpyAsync(r.ring + b * c, r.src + off, len, cudaMemcpyDeviceToHost, r.s0));
    CU(cuStreamWriteValue32(r.s0, reinterpret_cast<CUdeviceptr>(r.ready() + b), lap + 1, 0));
  }
}

// SMs device->host (producer grid), copy engine host->device behind stream memory op waits.
void sm_then_ce(rig& r, size_t n, size_t c, int blocks0) {
  const unsigned nslots = static_cast<unsigned>(std::min<size_t>(ring_bytes / c, max_flags));
  auto a = args(r, n, c, nslots);
  CK(cudaSetDevice(0));
  produce<<<blocks0, 1024, 0, r.s0>>>(a);
  CK(cudaGetLastError());
  CK(cudaSetDevice(1));
  size_t i = 0;
  for (size_t off = 0; off < n; off += c, ++i) {
    const size_t len = std::min(c, n - off), b = i % nslots;
    const unsigned lap = static_cast<unsigned>(i / nslots);
    CU(cuStreamWaitValue32(r.s1, reinterpret_cast<CUdeviceptr>(r.ready() + b), lap + 1,
                           CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaMemcpyAsync(r.dst + off, r.ring + b * c, len, cudaMemcpyHostToDevice, r.s1));
    CU(cuStreamWriteValue32(r.s1, reinterpret_cast<CUdeviceptr>(r.freed() + b), lap + 1, 0));
  }
}
