// The six CUDA driver calls that HIP's NVIDIA platform makes for the shim's exports (hipDeviceGet,
// hipDeviceGetName, hipDeviceTotalMem, hipMemGetAddressRange, hipMemsetD16Async and
// hipMemsetD32Async call cu* functions, not the runtime). Linking libcuda would make the shim unloadable wherever the driver is absent, and
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
