// The CUDA driver calls that HIP's NVIDIA platform makes for the shim's exports (hipDeviceGet,
// hipDeviceGetName, hipDeviceTotalMem, hipMemGetAddressRange, hipMemsetD16Async,
// hipMemsetD32Async and the hipCtx* calls call cu* functions, not the runtime). Linking libcuda would make the shim unloadable wherever the driver is absent, and
// "no driver" must be a reason for zero devices, not a failure to load; so they are defined here,
// hidden, each looking its driver entry up through the statically linked runtime
// (cudaGetDriverEntryPointByVersion), at the ABI version cuda.h's name stands for.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

namespace {

/// A driver entry point and why it is missing when it is.
template <typename F>
struct entry {
  F fn = nullptr;
  CUresult missing = CUDA_SUCCESS;
};

/// Looks `symbol` up at ABI `version` (e.g. 3020 for the _v2 functions).
template <typename F>
entry<F> lookup(const char* symbol, unsigned version) {
  entry<F> e;
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found) !=
      cudaSuccess) {
    e.missing = CUDA_ERROR_NOT_INITIALIZED;  // the runtime could not reach a driver
    return e;
  }
  if (found != cudaDriverEntryPointSuccess || !fn) {
    e.missing = CUDA_ERROR_NOT_FOUND;  // a driver older than the call
    return e;
  }
  // ISO C++ has no cast from an object pointer to a function pointer; the bytes are the same.
  static_assert(sizeof(F) == sizeof fn);
  std::memcpy(&e.fn, &fn, sizeof fn);
  return e;
}

}  // namespace

// The names are cuda.h's (cuDeviceTotalMem and cuMemGetAddressRange are macros for their _v2
// forms), so the signatures are checked against its declarations.

extern "C" CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  static const auto e = lookup<decltype(&cuDeviceGet)>("cuDeviceGet", 2000);
  return e.fn ? e.fn(device, ordinal) : e.missing;
}

extern "C" CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice device) {
  static const auto e = lookup<decltype(&cuDeviceGetName)>("cuDeviceGetName", 2000);
  return e.fn ? e.fn(name, len, device) : e.missing;
}

extern "C" CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  static const auto e = lookup<decltype(&cuDeviceTotalMem)>("cuDeviceTotalMem", 3020);
  return e.fn ? e.fn(bytes, device) : e.missing;
}

extern "C" CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr* base, size_t* size,
                                                 CUdeviceptr ptr) {
  static const auto e = lookup<decltype(&cuMemGetAddressRange)>("cuMemGetAddressRange", 3020);
  return e.fn ? e.fn(base, size, ptr) : e.missing;
}

extern "C" CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count,
                                             CUstream stream) {
  static const auto e = lookup<decltype(&cuMemsetD16Async)>("cuMemsetD16Async", 3020);
  return e.fn ? e.fn(dst, value, count, stream) : e.missing;
}

extern "C" CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                                             CUstream stream) {
  static const auto e = lookup<decltype(&cuMemsetD32Async)>("cuMemsetD32Async", 3020);
  return e.fn ? e.fn(dst, value, count, stream) : e.missing;
}

// Contexts (hipCtx*). cuCtxCreate is CUDA 11's (flags, device) form that hip_nvidia.hpp declares,
// an overload of cuda.h's name (CUDA 13's _v4); the driver still serves it as cuCtxCreate at 3020.
// The others keep one form, or cuda.h's name is the _v2 the lookup version names.

CUresult cuCtxCreate(CUcontext* ctx, unsigned int flags, CUdevice device) {
  using fn = CUresult(CUDAAPI*)(CUcontext*, unsigned int, CUdevice);
  static const auto e = lookup<fn>("cuCtxCreate", 3020);
  return e.fn ? e.fn(ctx, flags, device) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  static const auto e = lookup<decltype(&cuCtxDestroy)>("cuCtxDestroy", 4000);
  return e.fn ? e.fn(ctx) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  static const auto e = lookup<decltype(&cuCtxPushCurrent)>("cuCtxPushCurrent", 4000);
  return e.fn ? e.fn(ctx) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxPopCurrent(CUcontext* ctx) {
  static const auto e = lookup<decltype(&cuCtxPopCurrent)>("cuCtxPopCurrent", 4000);
  return e.fn ? e.fn(ctx) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  static const auto e = lookup<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent", 4000);
  return e.fn ? e.fn(ctx) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  static const auto e = lookup<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent", 4000);
  return e.fn ? e.fn(ctx) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxSynchronize(void) {
  static const auto e = lookup<decltype(&cuCtxSynchronize)>("cuCtxSynchronize", 2000);
  return e.fn ? e.fn() : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  static const auto e = lookup<decltype(&cuCtxGetDevice)>("cuCtxGetDevice", 2000);
  return e.fn ? e.fn(device) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  static const auto e = lookup<decltype(&cuCtxGetFlags)>("cuCtxGetFlags", 7000);
  return e.fn ? e.fn(flags) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  static const auto e = lookup<decltype(&cuCtxEnablePeerAccess)>("cuCtxEnablePeerAccess", 4000);
  return e.fn ? e.fn(peer, flags) : e.missing;
}

extern "C" CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer) {
  static const auto e =
      lookup<decltype(&cuCtxDisablePeerAccess)>("cuCtxDisablePeerAccess", 4000);
  return e.fn ? e.fn(peer) : e.missing;
}
