// Experiment (not part of the library; issue 14): what the driver's first query of a freshly
// IPC-opened mapping costs, by the call used to ask. memarea bounds every imported buffer by the
// size the driver says it mapped; MEMAREA_IPC_TIMING showed that query at 7-11 us on an H200's
// first import (0.3-0.6 us on later ones). Children are forked before anyone loads libcuda;
// the parent then exports one 2 MiB allocation per child, and each child (a fresh process:
// cuInit, primary context) opens its handle and times one way of asking, twice:
//   attrs5   cuPointerGetAttributes with memarea's five attributes
//   range1   cuPointerGetAttributes with RANGE_SIZE alone
//   addr     cuMemGetAddressRange
// Build (CUDA headers only; libcuda is loaded at run time) and run:
//   g++ -std=c++20 -O2 -isystem /usr/local/cuda/include bench/experiments/ipc_first_query.cpp
//       -ldl -o /tmp/ifq && /tmp/ifq [children per way=6]
#include "libcuda_dl.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*IpcGetMemHandle)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*IpcOpenMemHandle)(CUdeviceptr*, CUipcMemHandle, unsigned);
  CUresult (*IpcCloseMemHandle)(CUdeviceptr);
  CUresult (*PointerGetAttributes)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);
  CUresult (*MemGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr);
};

using libcuda_dl::load;
using libcuda_dl::ok;

api load_api() {
  void* lib = libcuda_dl::open();
  api cu{};
  load(lib, cu.Init, "cuInit");
  load(lib, cu.DeviceGet, "cuDeviceGet");
  load(lib, cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(lib, cu.CtxSetCurrent, "cuCtxSetCurrent");
  load(lib, cu.MemAlloc, "cuMemAlloc_v2");
  load(lib, cu.IpcGetMemHandle, "cuIpcGetMemHandle");
  load(lib, cu.IpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
  load(lib, cu.IpcCloseMemHandle, "cuIpcCloseMemHandle");
  load(lib, cu.PointerGetAttributes, "cuPointerGetAttributes");
  load(lib, cu.MemGetAddressRange, "cuMemGetAddressRange_v2");
  return cu;
}

void ready(const api& cu) {
  ok(cu.Init(0), "cuInit");
  CUdevice dev;
  ok(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  ok(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  ok(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
}

constexpr int kMaxChildren = 64;
constexpr std::size_t kBytes = std::size_t{2} << 20;

struct shared_state {
  std::atomic<int> handles_ready;
  std::atomic<int> children_done;
  CUipcMemHandle handle[kMaxChildren];
  double open_us[kMaxChildren], first_us[kMaxChildren], second_us[kMaxChildren];
  size_t size[kMaxChildren];
};

const char* const kWays[] = {"attrs5", "range1", "addr"};

double query(const api& cu, int way, CUdeviceptr p, size_t* size) {
  auto a = std::chrono::steady_clock::now();
  if (way == 0) {
    unsigned int memory_type = 0;
    unsigned long long is_managed = 0;
    int ordinal = -1;
    CUdeviceptr start = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[] = {&memory_type, &is_managed, &ordinal, &start, size};
    ok(cu.PointerGetAttributes(5, attrs, data, p), "cuPointerGetAttributes");
  } else if (way == 1) {
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[] = {size};
    ok(cu.PointerGetAttributes(1, attrs, data, p), "cuPointerGetAttributes");
  } else {
    CUdeviceptr base = 0;
    ok(cu.MemGetAddressRange(&base, size, p), "cuMemGetAddressRange");
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int per_way = argc > 1 ? std::atoi(argv[1]) : 6;
  const int n = 3 * per_way;
  if (per_way < 1 || n > kMaxChildren) return 64;
  auto* s = static_cast<shared_state*>(mmap(nullptr, sizeof(shared_state), PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (s == MAP_FAILED) return 4;
  std::memset(static_cast<void*>(s), 0, sizeof *s);
  std::vector<pid_t> kids;
  for (int k = 0; k < n; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      // One child at a time: each waits for the previous one to finish.
      while (s->handles_ready.load() == 0 || s->children_done.load() < k) usleep(100);
      const api cu = load_api();
      ready(cu);
      usleep(5000);  // settled, as the bench's cold rows
      CUdeviceptr p = 0;
      auto a = std::chrono::steady_clock::now();
      ok(cu.IpcOpenMemHandle(&p, s->handle[k], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
         "cuIpcOpenMemHandle");
      s->open_us[k] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
      size_t size = 0;
      s->first_us[k] = query(cu, k % 3, p, &size);
      s->second_us[k] = query(cu, k % 3, p, &size);
      s->size[k] = size;
      ok(cu.IpcCloseMemHandle(p), "cuIpcCloseMemHandle");
      s->children_done.fetch_add(1);
      _exit(0);
    }
    kids.push_back(pid);
  }
  const api cu = load_api();
  ready(cu);
  std::vector<CUdeviceptr> mem(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    ok(cu.MemAlloc(&mem[static_cast<std::size_t>(k)], kBytes), "cuMemAlloc");
    ok(cu.IpcGetMemHandle(&s->handle[k], mem[static_cast<std::size_t>(k)]), "cuIpcGetMemHandle");
  }
  s->handles_ready.store(1);
  int failed = 0;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  for (int way = 0; way < 3; ++way) {
    std::printf("%-7s", kWays[way]);
    for (int k = way; k < n; k += 3)
      std::printf("  [open %.1f, first %.1f, second %.2f us, size %zu]", s->open_us[k],
                  s->first_us[k], s->second_us[k], s->size[k]);
    std::printf("\n");
  }
  if (failed) std::printf("%d children failed\n", failed);
  return failed ? 1 : 0;
}
