// Whether a retained primary context's handle is usable after cuDevicePrimaryCtxReset_v2, as
// memarea's CUDA backend assumes (it keeps its retain and the cached handle across a device
// reset: docs/areas.md, "Resetting a device"). Prints each step's CUresult; 0 is success.
// Build: g++ -O1 -std=c++17 -isystem /usr/local/cuda/include primary_ctx_reset.cpp -ldl
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>

#define LOAD(name) auto name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name))

int main() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return std::puts("no libcuda.so.1"), 1;
  LOAD(cuInit);
  LOAD(cuDevicePrimaryCtxRetain);
  LOAD(cuDevicePrimaryCtxReset_v2);
  LOAD(cuDevicePrimaryCtxGetState);
  LOAD(cuCtxSetCurrent);
  LOAD(cuCtxGetCurrent);
  LOAD(cuMemAlloc_v2);
  LOAD(cuMemFree_v2);
  LOAD(cuStreamCreate);
  LOAD(cuStreamDestroy_v2);
  std::printf("init %d\n", cuInit(0));
  CUcontext c = nullptr, again = nullptr, current = nullptr;
  CUdeviceptr p = 0;
  CUstream s = nullptr;
  unsigned flags = 0;
  int active = -1;
  std::printf("retain %d, set current %d\n", cuDevicePrimaryCtxRetain(&c, 0), cuCtxSetCurrent(c));
  std::printf("alloc %d, stream %d\n", cuMemAlloc_v2(&p, 1 << 20), cuStreamCreate(&s, 1));
  std::printf("reset %d\n", cuDevicePrimaryCtxReset_v2(0));
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  cuCtxGetCurrent(&current);
  std::printf("active after reset %d, current is the old handle %d\n", active, current == c);
  std::printf("alloc in the old handle %d\n", cuMemAlloc_v2(&p, 1 << 20));
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  std::printf("active after that alloc %d\n", active);
  std::printf("retain again %d, same handle %d\n", cuDevicePrimaryCtxRetain(&again, 0),
              again == c);
  std::printf("free %d; destroy the stream made before the reset %d\n", cuMemFree_v2(p),
              cuStreamDestroy_v2(s));
  return 0;
}
